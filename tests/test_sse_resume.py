"""Streamable HTTP streams a client can resume (SEP-1699): each POST's SSE stream opens with a priming event
(an id, empty data, `retry`), and a tool declared `closeStream` ends its stream mid-call; the client reconnects
with Last-Event-ID and is sent the result. A real server subprocess (no model: --replay-only and fixtures),
raw HTTP as the conformance suite's check does it, and the real MCP client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client

from mcp_sim.base import defaults
from tests.conftest import SPECS, start_http_server, stop

CONFORMANCE = SPECS / "conformance" / "conformance.yaml"
VERSION = "2025-11-25"  # the first protocol version whose clients resume (older ones are never primed)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    process, address = start_http_server(str(CONFORMANCE), "--replay-only")
    try:
        yield address
    finally:
        stop(process)


def events(response: httpx.Response) -> Iterator[dict[str, str]]:
    """The SSE events of a response as they come, each as its fields (id, data, retry)."""
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if current:
                yield current
            current = {}
            continue
        name, _, value = line.partition(":")
        current[name] = current.get(name, "") + value.removeprefix(" ")
    if current:
        yield current


def test_a_stream_is_primed_closed_mid_call_and_resumed_with_last_event_id(url: str) -> None:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=30) as http:
        initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": VERSION, "capabilities": {},
                                 "clientInfo": {"name": "raw", "version": "1"}}}
        opened = http.post(url, headers=headers, json=initialize)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "test_reconnection"}}
        with http.stream("POST", url, headers=session, json=call) as response:
            first = list(events(response))
        assert first[0]["data"] == "" and first[0]["id"] and first[0]["retry"] == str(defaults.SSE_RETRY_MS)
        assert not any('"id":1' in event.get("data", "") for event in first)  # closed before the result

        resume = {**session, "Accept": "text/event-stream", "last-event-id": first[-1]["id"]}
        with http.stream("GET", url, headers=resume) as response:
            replies = []
            for event in events(response):
                if event.get("data"):
                    replies.append(json.loads(event["data"]))
                    break  # the GET stream stays open for later messages
        assert replies[0]["id"] == 1 and "Reconnection test completed successfully" in json.dumps(replies[0])


@pytest.mark.anyio
async def test_the_mcp_client_resumes_the_closed_stream_on_its_own(url: str) -> None:
    with anyio.fail_after(30):
        async with Client(url, mode="legacy") as client:
            result = await client.call_tool("test_reconnection", {})
    assert not result.is_error
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text
