"""Worlds over real streamable HTTP with the real model: every client keeps a world without special code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY
from tests.conftest import SPECS, start_http_server, stop

pytestmark = pytest.mark.anyio

SERVE = (str(SPECS / "files.yaml"), str(SPECS / "ops.yaml"), "--expose-prompt", "--expose-world",
         "--max-tokens", "96", "--temperature", "0")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    process, url = start_http_server(*SERVE)
    try:
        yield url
    finally:
        stop(process)


def meta(result: Any) -> dict[str, Any]:
    return result.meta[META_KEY]  # type: ignore[no-any-return]


def history_of(result: Any) -> str:
    """The prompt's turns after the system message: what the model was shown of the world so far."""
    return "\n".join(message["content"] for message in meta(result)["prompt"][1:])


def system_of(result: Any) -> str:
    return str(meta(result)["prompt"][0]["content"])


def admin(*args: str) -> str:
    done = CliRunner().invoke(cli, ["worlds", *args])
    assert done.exit_code == 0, done.output
    return done.output


async def test_a_default_stateless_client_keeps_its_writes(server: str) -> None:
    async with Client(server, read_timeout_seconds=300) as client:  # the SDK's default: 2026-07-28, no session
        assert client.protocol_version >= "2026"
        write = await client.call_tool("write_file", {"path": "/notes/plan.md", "content": "ship on friday"})
        read = await client.call_tool("read_file", {"path": "/notes/plan.md"})
        # A path never written: the model answers, and its prompt holds the world's history.
        other = await client.call_tool("read_file", {"path": "/notes/never.md"})
    assert not write.is_error and not read.is_error, (write.content, read.content)
    assert read.structured_content is not None and read.structured_content["content"] == "ship on friday"
    assert meta(read)["world"] == "default" and meta(other)["history_turns"] >= 2
    assert '"name": "write_file"' in history_of(other) and "ship on friday" in history_of(other)


async def test_worlds_named_in_the_url_never_see_each_other(server: str) -> None:
    prompts: dict[str, str] = {}
    for name in ("alpha", "beta"):
        async with Client(f"{server}?world={name}", read_timeout_seconds=300) as client:
            await client.call_tool("write_file", {"path": f"/{name}.txt", "content": f"{name} data"})
            read = await client.call_tool("read_file", {"path": f"/{name}-other.txt"})  # the model answers
            assert meta(read)["world"] == name
            prompts[name] = history_of(read)
    assert "/alpha.txt" in prompts["alpha"] and "/beta" not in prompts["alpha"]
    assert "/beta.txt" in prompts["beta"] and "/alpha" not in prompts["beta"]


async def test_a_scenario_picked_in_the_url_changes_the_prompt_and_the_answer(server: str) -> None:
    call = ("get_service_status", {"service": "postgres"})
    async with Client(f"{server}?world=calm-day", read_timeout_seconds=300) as client:
        calm = await client.call_tool(*call)
    async with Client(f"{server}?world=bad-day&scenario=postgres-down", read_timeout_seconds=300) as client:
        down = await client.call_tool(*call)
    assert not calm.is_error and not down.is_error
    assert meta(down)["scenario"] == "postgres-down" and 'Scenario "postgres-down"' in system_of(down)
    assert "postgres-down" not in system_of(calm)
    # Greedy decoding of the same call: only the scenario differs, and so does the simulated state.
    assert down.structured_content != calm.structured_content


async def test_reset_fork_and_export_from_the_operator_cli(server: str) -> None:
    root = server.rsplit("/mcp", 1)[0]
    async with Client(f"{server}?world=origin", read_timeout_seconds=300) as client:
        await client.call_tool("write_file", {"path": "/origin.txt", "content": "before the fork"})
    assert "origin" in admin("list", "--url", root)
    admin("fork", "origin", "origin-copy", "--url", root)
    async with Client(f"{server}?world=bystander", read_timeout_seconds=300) as client:
        await client.call_tool("list_files", {})  # takes the model: the origin's state is parked
    async with Client(f"{server}?world=origin-copy", read_timeout_seconds=300) as client:
        forked = await client.call_tool("write_file", {"path": "/copy-only.txt", "content": "after"})
        again = await client.call_tool("list_files", {})
    assert "before the fork" in history_of(forked)
    # The fork resumed from the origin's parked state: it evaluated its own new call, not the origin's turn
    # (which a fork without the origin's state would re-read after the shared system prompt).
    print("fork first call: evaluated", meta(forked)["evaluated_tokens"], "of", meta(forked)["prompt_tokens"],
          "; next call:", meta(again)["evaluated_tokens"])
    assert meta(forked)["evaluated_tokens"] <= 2 * meta(again)["evaluated_tokens"]
    exported = json.loads(admin("export", "origin", "--url", root))
    assert "/copy-only.txt" not in json.dumps(exported) and exported["calls"] == 1
    admin("reset", "origin", "--url", root)
    async with Client(f"{server}?world=origin", read_timeout_seconds=300) as client:
        after_reset = await client.call_tool("read_file", {"path": "/origin.txt"})
    assert meta(after_reset)["history_turns"] == 0 and "before the fork" not in history_of(after_reset)
    shown = admin("show", "origin-copy", "--url", root)
    assert "/copy-only.txt" in shown and "/origin.txt" in shown
    missing = CliRunner().invoke(cli, ["worlds", "reset", "nowhere", "--url", root])
    assert missing.exit_code == 1 and "no world named 'nowhere'" in missing.output


async def test_the_world_resource_shows_what_the_simulator_believes(server: str) -> None:
    async with Client(f"{server}?world=inspected", read_timeout_seconds=300) as client:
        await client.call_tool("drop_cache", {"cache": "redis"})
        listed = await client.list_resources()
        # files.yaml's own resource first, then the world
        assert [str(r.uri) for r in listed.resources] == ["docs://files/README.md", "sim://world"]
        read = await client.read_resource("sim://world")
    state = json.loads(read.contents[0].text)  # type: ignore[union-attr]
    assert state["name"] == "inspected" and state["calls"] == 1
    actions = [json.loads(turn["action"]) for turns in state["history"].values() for turn in turns]
    assert actions == [{"name": "drop_cache", "arguments": {"cache": "redis"}}]


async def test_bad_world_names_and_scenarios_are_tool_errors_and_the_server_keeps_serving(server: str) -> None:
    async with Client(f"{server}?world=bad%20name", read_timeout_seconds=300) as client:
        bad = await client.call_tool("list_files", {})
    assert bad.is_error and "not allowed" in bad.content[0].text  # type: ignore[union-attr]
    async with Client(f"{server}?world=fine&scenario=meteor", read_timeout_seconds=300) as client:
        unknown = await client.call_tool("list_files", {})
        assert unknown.is_error and "unknown scenario 'meteor'" in unknown.content[0].text  # type: ignore[union-attr]
    async with Client(server, read_timeout_seconds=300) as client:
        good = await client.call_tool("list_files", {}, meta={"mcp-sim/world": "fine"})
    assert not good.is_error and good.meta[META_KEY]["world"] == "fine"  # type: ignore[index]


async def test_a_restarted_server_continues_its_worlds(tmp_path: Path) -> None:
    args = (str(SPECS / "files.yaml"), "--expose-prompt", "--max-tokens", "96", "--state-dir", str(tmp_path))
    process, url = start_http_server(*args)
    try:
        async with Client(f"{url}?world=durable", read_timeout_seconds=300) as client:
            await client.call_tool("write_file", {"path": "/kept.txt", "content": "survives a restart"})
    finally:
        stop(process)
    process, url = start_http_server(*args)
    try:
        async with Client(f"{url}?world=durable", read_timeout_seconds=300) as client:
            read = await client.call_tool("read_file", {"path": "/kept.txt"})
            other = await client.call_tool("read_file", {"path": "/other.txt"})  # the model answers
    finally:
        stop(process)
    assert meta(read)["turn"] == 2 and read.structured_content is not None
    assert read.structured_content["content"] == "survives a restart"  # the live state came back too
    assert meta(other)["turn"] == 3 and "survives a restart" in history_of(other)
