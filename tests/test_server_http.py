"""A real mcp client over streamable HTTP: sessions, history, isolation."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from mcp_sim.core.simulator import META_KEY
from mcp_sim.core.specs import load_catalog, validation_error
from tests.conftest import SPECS
from tests.test_simulator_model import ONE_PER_SPEC

pytestmark = pytest.mark.anyio



def prompt_of(result: object) -> str:
    meta = result.meta[META_KEY]  # type: ignore[attr-defined]
    return "\n".join(message["content"] for message in meta["prompt"][1:])


async def test_every_tool_is_listed_and_every_spec_answers_over_http(http_server: str) -> None:
    catalog = load_catalog([SPECS])
    async with Client(http_server, mode="legacy", read_timeout_seconds=300) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == list(catalog.tools)
        for name, arguments in ONE_PER_SPEC:
            result = await client.call_tool(name, arguments, meta={"mcp-sim/session": f"http-{name}"})
            assert not result.is_error, f"{name}: {result.content}"
            schema = catalog.tools[name].output_schema
            if schema is not None:
                assert validation_error(result.structured_content, schema) is None


async def test_two_sessions_at_once_keep_their_own_history(http_server: str) -> None:
    prompts: dict[str, list[str]] = {"alpha": [], "beta": []}

    async def run_session(tag: str) -> None:
        async with Client(http_server, mode="legacy", read_timeout_seconds=300) as client:
            for step in range(3):
                result = await client.call_tool(
                    "write_file", {"path": f"/{tag}/step-{step}.txt", "content": f"{tag}-{step}"})
                assert not result.is_error, result.content
                prompts[tag].append(prompt_of(result))

    async with anyio.create_task_group() as group:
        group.start_soon(run_session, "alpha")
        group.start_soon(run_session, "beta")

    for tag, other in (("alpha", "beta"), ("beta", "alpha")):
        for step, prompt in enumerate(prompts[tag]):
            for earlier in range(step + 1):  # call N's prompt holds calls 1..N
                assert f"/{tag}/step-{earlier}.txt" in prompt
            assert f"/{tag}/step-{step + 1}.txt" not in prompt
            assert f"/{other}/" not in prompt, "a session saw another session's history"


async def test_stateless_clients_keep_history_with_an_explicit_world_key(http_server: str) -> None:
    async with Client(http_server, read_timeout_seconds=300) as client:  # 2026-07-28: no transport session
        meta = {"mcp-sim/session": "explicit-key"}  # the older name of mcp-sim/world, still honoured
        first = await client.call_tool("get_weather", {"city": "Nairobi"}, meta=meta)
        second = await client.call_tool("get_weather", {"city": "Lagos"}, meta=meta)
        anonymous = await client.call_tool("get_weather", {"city": "Accra"})
    assert first.meta[META_KEY]["history_turns"] == 0 and first.meta[META_KEY]["world"] == "explicit-key"
    assert second.meta[META_KEY]["history_turns"] == 1 and "Nairobi" in prompt_of(second)
    # A call that names no world is answered in the server's default world, which never saw the others.
    assert anonymous.meta[META_KEY]["world"] == "default" and "Nairobi" not in prompt_of(anonymous)
