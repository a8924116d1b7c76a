"""Fuzz one real `mcp-sim serve --transport http` with hostile bodies: each gets a JSON-RPC error or an isError
result (a notification: 202 and nothing), the process stays up, and a real model call right after still succeeds.

Over HTTP the SDK's own transport answers what it cannot read: 400 with a JSON-RPC error whose id is null, 404
for a closed session. mcp-sim's guard before it (mcp_sim/serving/http_guard.py) answers the rest in JSON-RPC too: a body
over 4 MiB gets 413 with a -32600 error (the request's id when the head of the body shows it), and a request
whose id is null, true, a fraction or an object, which the SDK would take for a notification (202 and no body),
gets 400 with -32600 and id null.

Run it under the model lock (the server loads the model); the summary of cases per input class is printed at
the end of the module.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_sim.base import defaults
from tests import fuzz_cases as fc
from tests.conftest import SPECS, free_port, mcp_sim_command, stop, subprocess_env, wait_for_port

BODY_LIMIT = defaults.HTTP_MAX_BODY_BYTES
TALLY = fc.Tally()
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class HttpPeer:
    process: subprocess.Popen[bytes]
    client: httpx.Client
    session: str
    next_number: int = 1

    def next_id(self) -> str:
        self.next_number += 1
        return f"fuzz-{self.next_number:07d}"  # fixed width: the drawn cases must not depend on it

    def reserve(self, count: int) -> int:
        first = 1_000_000 + self.next_number * 1_000
        self.next_number += count // 1_000 + 1
        return first

    def post(self, body: bytes, session: str | None = None) -> tuple[httpx.Response, list[dict[str, Any]]]:
        headers = {**HEADERS, "mcp-session-id": session or self.session, "mcp-protocol-version": "2025-11-25"}
        response = self.client.post("/mcp", content=body, headers=headers)
        return response, messages_of(response)

    def check(self, case: fc.Case, session: str | None = None) -> None:
        response, messages = self.post(case.body, session)
        TALLY.add(case, judge(case, response, messages))
        assert self.process.poll() is None, f"the server exited after {case!r}"

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id()
        response, messages = self.post(fc.dumps(fc.call(rid, name, arguments)))
        answers = [m for m in messages if m.get("id") == rid]
        assert response.status_code == 200 and len(answers) == 1, (response.status_code, response.text[:300])
        return answers[0]


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: an SSE stream's data lines, or a JSON body."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        # SSE lines end at \n (or \r\n) only: str.splitlines would also cut at U+0085 or U+2028 inside the JSON.
        lines = (line.rstrip("\r") for line in response.text.split("\n"))
        # A priming event (an id and `retry`, SEP-1699) carries an empty data line: no message.
        return [json.loads(line[5:]) for line in lines if line.startswith("data:") and line[5:].strip()]
    if kind.startswith("application/json") and response.content:
        body = response.json()
        return body if isinstance(body, list) else [body]
    return []


def judge(case: fc.Case, response: httpx.Response, messages: list[dict[str, Any]]) -> str:
    """Assert the response answers `case`; return how, for the summary."""
    status = response.status_code
    answers = [m for m in messages if "method" not in m]  # the server's own notifications aside
    if status == 413:
        assert len(case.body) > BODY_LIMIT, f"{case!r}: 413 for a body under the limit"
        assert response.headers["content-type"] == "application/json", response.headers
        (answer,) = answers
        assert answer["error"]["code"] == -32600 and f"limit of {BODY_LIMIT:,} bytes" in answer["error"]["message"]
        assert answer["id"] is None or answer["id"] in case.answers[0], f"{case!r}: 413 for id {answer['id']}"
        return f"413 error -32600, {'id null' if answer['id'] is None else 'its id'}"
    if status == 202:
        assert not case.answers, f"{case!r}: 202 and no answer for a request"
        return "202 notification"
    assert status in (200, 400), f"{case!r}: HTTP {status}: {response.text[:300]}"
    assert case.answers, f"{case!r}: a notification was answered: {response.text[:300]}"
    assert answers and all(fc.is_error_answer(a) for a in answers), f"{case!r}: {response.text[:300]}"
    if status == 400:  # the transport refused the body: one error, id null
        assert len(answers) == 1 and answers[0]["id"] is None
        return f"400 error {answers[0]['error']['code']}"
    owed = list(case.answers)
    for answer in answers:
        slot = next((s for s in owed if answer["id"] in s), None)
        assert slot is not None, f"{case!r}: an answer nobody was owed: {str(answer)[:300]}"
        owed.remove(slot)
    assert not owed, f"{case!r}: no answer for {owed}"
    first = answers[0]
    return f"200 error {first['error']['code']}" if "error" in first else "200 isError result"


def open_session(client: httpx.Client) -> str:
    initialize = fc.request("init", "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                   "clientInfo": {"name": "fuzz", "version": "1"}})
    response = client.post("/mcp", content=fc.dumps(initialize), headers=HEADERS)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = fc.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    assert client.post("/mcp", content=initialized, headers=headers).status_code == 202
    return session


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[HttpPeer]:
    stderr = tmp_path_factory.mktemp("fuzz-http") / "serve.log"
    started = time.monotonic()
    port = free_port()
    with stderr.open("wb") as sink:
        process = subprocess.Popen(mcp_sim_command("serve", str(SPECS / "ops.yaml"), "--transport", "http",
                                                   "--port", str(port), "--max-tokens", "32"),
                                   env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=sink)
    try:
        wait_for_port(port, process)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield HttpPeer(process, client, open_session(client))
    finally:
        stop(process)
        report(pytestconfig, stderr, time.monotonic() - started)


def report(config: pytest.Config, stderr: Path, seconds: float) -> None:
    TALLY.report(config, f"HTTP fuzz summary ({seconds:.0f} s with the server's start)")
    assert "Traceback" not in stderr.read_text(errors="replace"), "the server logged a traceback"


def still_serving(peer: HttpPeer) -> None:
    """The process is up and a real model call succeeds."""
    assert peer.process.poll() is None
    answer = peer.call_tool(*fc.VALID_CALL)
    assert answer["result"]["isError"] is False, answer
    assert answer["result"]["_meta"]["mcp-sim/simulation"]["simulated"] is True


def fuzz(peer: HttpPeer, strategy: Callable[[Any], st.SearchStrategy[fc.Case]], examples: int,
         session: str | None = None) -> None:
    @settings(fc.FUZZ, max_examples=examples)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        peer.check(data.draw(strategy(peer.next_id())), session)

    run()
    still_serving(peer)


def test_malformed_json(peer: HttpPeer) -> None:
    fuzz(peer, fc.malformed_json, 80)


def test_invalid_utf8(peer: HttpPeer) -> None:
    fuzz(peer, fc.bad_utf8, 40)


def test_wrong_jsonrpc_shapes(peer: HttpPeer) -> None:
    fuzz(peer, fc.wrong_shape, 80)


def test_unknown_methods(peer: HttpPeer) -> None:
    fuzz(peer, fc.unknown_method, 60)


def test_arguments_of_every_wrong_type(peer: HttpPeer) -> None:
    fuzz(peer, fc.wrong_arguments, 80)


def test_10mb_strings(peer: HttpPeer) -> None:
    fuzz(peer, fc.huge_string, 10)


def test_nesting_up_to_10000_levels(peer: HttpPeer) -> None:
    fuzz(peer, fc.deep_nesting, 60)


@pytest.mark.parametrize("depth", [3_000, 10_000])
def test_a_body_nested_deep_gets_a_parse_error(peer: HttpPeer, depth: int) -> None:
    rid = peer.next_id()
    body = b'{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"get_service_status",' \
        b'"arguments":{"service":%s}}}' % (rid.encode(), b"[" * depth + b"]" * depth)
    response, (answer,) = peer.post(body)
    assert response.status_code == 400
    assert answer["error"]["code"] == -32700 and "recursion limit exceeded" in answer["error"]["message"]
    TALLY.add(fc.Case("deep-nesting", body, fc.one(rid)), f"400 error {answer['error']['code']}")


@pytest.mark.parametrize("rid", [None, True, 0.5, 1.0, {"a": 1}, [1]], ids=repr)
def test_a_request_whose_id_the_sdk_cannot_take_gets_invalid_request(peer: HttpPeer, rid: Any) -> None:
    """The SDK would take it for a notification: 202, no body, and a client waiting forever."""
    body = fc.dumps(fc.call(rid, *fc.VALID_CALL))
    response, messages = peer.post(body)
    assert response.status_code == 400 and response.headers["content-type"] == "application/json"
    assert messages == [{"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request: the id must be a string or an integer"}}]
    TALLY.add(fc.Case("bad-id", body, fc.one(None)), "400 error -32600")
    still_serving(peer)


def test_a_chunked_body_over_the_limit_gets_a_json_413_with_its_id(peer: HttpPeer) -> None:
    """No Content-Length to refuse it by: the guard reads up to the limit, no further, and answers."""
    rid = peer.next_id()
    body = fc.dumps(fc.call(rid, "get_service_status", {"service": "x" * (3 * BODY_LIMIT)}))
    headers = {**HEADERS, "mcp-session-id": peer.session, "mcp-protocol-version": "2025-11-25"}
    pieces = (body[i:i + 65_536] for i in range(0, len(body), 65_536))
    response = peer.client.post("/mcp", content=pieces, headers=headers)
    assert "content-length" not in response.request.headers
    judged = judge(fc.Case("10MB-string", body, fc.one(rid)), response, messages_of(response))
    assert judged == "413 error -32600, its id"
    TALLY.add(fc.Case("10MB-string", body, fc.one(rid)), judged + " (chunked)")
    still_serving(peer)


def test_huge_batches(peer: HttpPeer) -> None:
    fuzz(peer, lambda _: fc.huge_batch(peer.reserve(300)), 25)
    peer.check(fc.batch(peer.reserve(10_000), ["ping"] * 10_000))


def test_requests_on_a_closed_session_get_404_and_other_sessions_go_on(peer: HttpPeer) -> None:
    closed = open_session(peer.client)
    headers = {**HEADERS, "mcp-session-id": closed, "mcp-protocol-version": "2025-11-25"}
    assert peer.client.delete("/mcp", headers=headers).status_code in (200, 204)

    @settings(fc.FUZZ, max_examples=40)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        strategy = data.draw(st.sampled_from([fc.malformed_json, fc.wrong_arguments, fc.unknown_method,
                                              fc.deep_nesting, fc.valid_case]))
        case = data.draw(strategy(peer.next_id()))
        response, messages = peer.post(case.body, closed)
        assert response.status_code == 404, f"{case!r} on a closed session: HTTP {response.status_code}"
        assert len(messages) == 1 and fc.is_error_answer(messages[0])
        TALLY.add(fc.Case("closed-session", case.body, case.answers), f"404 error {messages[0]['error']['code']}")

    run()
    still_serving(peer)
