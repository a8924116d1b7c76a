"""`mcp-sim shadow` against real servers with the real model: reads marked read-only come from the real server,
every write is simulated in the world, the agent reads its own writes back, and the real server's data is
byte for byte what it was."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client

from mcp_sim.rehearsal.shadow import REAL, WORLD, patch_listing, route
from tests.conftest import REPO, mcp_sim_command
from tests.fidelity_helpers import filesystem_server, run_cli, stdio

SQLITE_SERVER = REPO / ".venv-peers" / "bin" / "mcp-server-sqlite"


def checksums(root: Path) -> dict[str, str]:
    """Every path under ROOT with its bytes' digest (folders as such), and the modes: what the server may not change."""
    found = {}
    for path in sorted(root.rglob("*")):
        kind = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
        found[str(path.relative_to(root))] = f"{kind} {path.stat().st_mode:o}"
    return found


def simulation(result: types.CallToolResult) -> dict[str, Any]:
    return (result.meta or {}).get("mcp-sim/simulation", {})


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def from_real(result: types.CallToolResult) -> bool:
    meta = simulation(result)
    assert (meta["source"] == REAL) == (meta["simulated"] is False), meta  # a real answer never says simulated
    return bool(meta["source"] == REAL)


# --- Routing and listings, without a model -------------------------------------------------------------


def test_the_plan_sends_marked_reads_to_the_real_server_and_everything_else_to_the_world(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    completed = run_cli("shadow", "--plan", "--", *filesystem_server(tmp_path))
    assert completed.returncode == 0, completed.stderr
    plan = {line.split()[0]: line for line in completed.stdout.splitlines()}
    assert "real server  the server marks it readOnlyHint: true" in plan["read_text_file"]
    assert "simulated    the server marks it destructiveHint: true" in plan["write_file"]
    assert "simulated" in plan["move_file"] and "simulated" in plan["create_directory"]
    assert len(plan) == 14  # every tool the server lists, once


def test_names_alone_never_reach_the_real_server() -> None:
    from mcp_sim.core.specs import ToolSpec

    schema = {"type": "object"}
    assert route(ToolSpec("get_thing", schema)).goes_to == WORLD  # no mark: simulated, whatever the name
    assert route(ToolSpec("get_thing", schema), declared_read_only=["get_thing"]).goes_to == REAL
    assert route(ToolSpec("wipe", schema, read_only=True)).goes_to == REAL  # the spec decides
    assert route(ToolSpec("peek", schema, annotations={"readOnlyHint": True}, read_only=False)).goes_to == WORLD
    assert route(ToolSpec("rm", schema, annotations={"readOnlyHint": True, "destructiveHint": True})).goes_to == WORLD
    assert route(ToolSpec("fetch", schema, annotations={"readOnlyHint": True, "openWorldHint": True})).goes_to == WORLD


def test_a_listing_shows_the_worlds_writes_in_its_siblings_layout() -> None:
    listing = "[FILE] a.txt\n[FILE] b.txt\n[DIR] sub"
    patched = patch_listing(listing, removed=["/r/a.txt"], added=["/r/c.txt", "/r/new"])
    assert patched.split("\n") == ["[FILE] b.txt", "[DIR] sub", "[FILE] c.txt", "[DIR] new"]
    paths = "/r/a.txt\n/r/b.txt"
    assert patch_listing(paths, [], ["/r/c.txt"]).split("\n") == ["/r/a.txt", "/r/b.txt", "/r/c.txt"]


def test_an_unknown_read_only_tool_and_an_offline_run_without_a_spec_are_refused(tmp_path: Path) -> None:
    completed = run_cli("shadow", "--plan", "--read-only", "nope", "--", *filesystem_server(tmp_path))
    assert completed.returncode != 0 and "--read-only names no tool of the server: nope" in completed.stderr
    (tmp_path / "t.jsonl").write_text("")
    completed = run_cli("shadow", "--replay", str(tmp_path / "t.jsonl"))
    assert completed.returncode != 0 and "needs the server's spec: --spec FILE" in completed.stderr


# --- The filesystem server over a temporary folder, with the real model --------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("real-folder")
    (root / "a.txt").write_text("alpha one\nalpha two\n")
    (root / "b.txt").write_text("bravo\n")
    (root / "untouched.txt").write_text("as it was on disk\n")
    (root / "sub").mkdir()
    yield root


def rehearsal(root: Path) -> list[tuple[str, dict[str, Any]]]:
    """What the agent does: look, read, write, edit, move, and read it all back."""
    return [
        ("list_directory", {"path": str(root)}),
        ("read_text_file", {"path": str(root / "a.txt")}),
        ("write_file", {"path": str(root / "c.txt"), "content": "charlie\n"}),
        ("read_text_file", {"path": str(root / "c.txt")}),
        ("edit_file", {"path": str(root / "b.txt"), "edits": [{"oldText": "bravo", "newText": "BRAVO"}]}),
        ("read_text_file", {"path": str(root / "b.txt")}),
        ("move_file", {"source": str(root / "a.txt"), "destination": str(root / "d.txt")}),
        ("read_text_file", {"path": str(root / "d.txt")}),
        ("read_text_file", {"path": str(root / "a.txt")}),
        ("list_directory", {"path": str(root)}),
        ("read_text_file", {"path": str(root / "untouched.txt")}),
    ]


async def rehearse(server: list[str], calls: list[tuple[str, dict[str, Any]]]) -> list[types.CallToolResult]:
    async with Client(stdio(server), mode="legacy") as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


@pytest.fixture(scope="module")
def shadowed(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("shadow")
    spec, trace, cache = work / "filesystem.yaml", work / "real.jsonl", work / "cache.sqlite"
    assert run_cli("mirror", "--out", str(spec), "--", *filesystem_server(folder)).returncode == 0
    before = checksums(folder)
    command = mcp_sim_command("shadow", "--spec", str(spec), "--record", str(trace), "--cache", str(cache),
                              "--", *filesystem_server(folder))
    results = anyio.run(rehearse, command, rehearsal(folder))
    return {"spec": spec, "trace": trace, "cache": cache, "before": before, "after": checksums(folder),
            "results": results}


def test_reads_agree_with_the_agents_writes_and_untouched_files_read_real_bytes(shadowed: dict[str, Any],
                                                                                folder: Path) -> None:
    (listed, read_a, write_c, read_c, edit_b, read_b, move, read_d, read_gone, relisted,
     read_untouched) = shadowed["results"]
    assert from_real(listed) and text(listed).split("\n") == ["[FILE] a.txt", "[FILE] b.txt", "[DIR] sub",
                                                              "[FILE] untouched.txt"]
    assert from_real(read_a) and text(read_a) == "alpha one\nalpha two\n"  # the real bytes
    for write in (write_c, edit_b, move):
        assert not from_real(write) and not write.is_error
    # The world's own writes win: each read of what the agent wrote comes from the world.
    assert not from_real(read_c) and read_c.structured_content == {"content": "charlie\n"}
    assert not from_real(read_b) and read_b.structured_content == {"content": "BRAVO\n"}  # edited from real bytes
    assert not from_real(read_d) and read_d.structured_content == {"content": "alpha one\nalpha two\n"}
    assert read_gone.is_error and not from_real(read_gone)  # moved away, in the world
    # The folder, read again from the real server, with the world's changes in it.
    assert from_real(relisted) and simulation(relisted).get("patched")
    assert sorted(text(relisted).split("\n")) == ["[DIR] sub", "[FILE] b.txt", "[FILE] c.txt", "[FILE] d.txt",
                                                  "[FILE] untouched.txt"]
    assert from_real(read_untouched) and text(read_untouched) == "as it was on disk\n"


def test_no_write_reaches_the_real_folder(shadowed: dict[str, Any], folder: Path) -> None:
    assert shadowed["after"] == shadowed["before"]  # byte for byte, modes included
    assert not (folder / "c.txt").exists() and (folder / "a.txt").read_text() == "alpha one\nalpha two\n"
    recorded = [json.loads(line) for line in shadowed["trace"].read_text().splitlines()]
    asked = {record["tool"] for record in recorded}
    assert asked <= {"list_directory", "read_text_file", "read_file"}  # reads only, ever
    assert not {"write_file", "edit_file", "move_file"} & asked


def test_a_recorded_shadow_rehearsal_replays_offline_with_the_same_answers(shadowed: dict[str, Any],
                                                                          folder: Path) -> None:
    # No server: the real answers come from the recording, the simulated ones from the cache, nothing from a model.
    command = mcp_sim_command("shadow", "--spec", str(shadowed["spec"]), "--replay", str(shadowed["trace"]),
                              "--cache", str(shadowed["cache"]), "--replay-only")
    replayed = anyio.run(rehearse, command, rehearsal(folder))
    for first, again in zip(shadowed["results"], replayed, strict=True):
        assert (text(again), again.is_error, again.structured_content) == \
            (text(first), first.is_error, first.structured_content)
        assert simulation(again)["source"] in (simulation(first)["source"], "cache")


# --- A server that marks nothing, with reads declared in the spec ---------------------------------------


def test_declared_reads_of_an_unannotated_server_are_real_and_its_database_is_unchanged(tmp_path: Path) -> None:
    database = tmp_path / "shop.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO users (name) VALUES ('ada')")
    server = [str(SQLITE_SERVER), "--db-path", str(database)]
    spec = tmp_path / "sqlite.yaml"
    assert run_cli("mirror", "--out", str(spec), "--", *server).returncode == 0
    document = yaml.safe_load(spec.read_text())
    assert not any(tool.get("annotations") for tool in document["tools"])  # it marks nothing
    for tool in document["tools"]:
        if tool["name"] in ("list_tables", "describe_table"):
            tool.setdefault("x-sim", {})["read_only"] = True
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    calls = [("list_tables", {}), ("describe_table", {"table_name": "users"}),
             ("write_query", {"query": "INSERT INTO users (name) VALUES ('grace')"}),
             ("create_table", {"query": "CREATE TABLE orders (id INTEGER PRIMARY KEY)"}),
             ("read_query", {"query": "SELECT name FROM users"})]
    tables, described, insert, create, select = anyio.run(
        rehearse, mcp_sim_command("shadow", "--spec", str(spec), "--", *server), calls)
    assert from_real(tables) and "users" in text(tables)
    assert from_real(described) and "name" in text(described) and "TEXT" in text(described)
    for simulated in (insert, create, select):  # undeclared: simulated, whatever its name
        assert not from_real(simulated)
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT name FROM users").fetchall() == [("ada",)]
        assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'orders'").fetchall() == []


# --- Sampling and subscriptions pass through (the reference server-everything, no model) ----------------


def test_the_real_servers_sampling_and_resource_updates_reach_the_agent(tmp_path: Path) -> None:
    """A real read that asks the client to sample gets the agent's answer, and a resource the agent watches
    reports the real server's updates. The two tools are declared read-only here (server-everything marks
    neither): only then does shadow let them reach the real server."""
    from tests.fidelity_helpers import everything_server

    asked: list[str] = []
    updated: list[str] = []
    trace = tmp_path / "real.jsonl"

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        block = params.messages[0].content
        asked.append(block.text if isinstance(block, types.TextContent) else "")
        return types.CreateMessageResult(role="assistant", model="the-agents-model",
                                         content=types.TextContent(type="text", text="sampled by the agent"))

    async def notified(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async def run() -> types.CallToolResult:
        command = mcp_sim_command("shadow", "--replay-only", "--record", str(trace),
                                  "--read-only", "trigger-sampling-request", "--read-only", "toggle-subscriber-updates",
                                  "--", *everything_server("stdio"))
        async with Client(stdio(command), mode="legacy", sampling_callback=sample,
                          message_handler=notified) as client:
            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "name a colour", "maxTokens": 5})
            await client.call_tool("toggle-subscriber-updates", {})  # the real server: updates every 5 s
            # Subscribed after the call, so that mcp-sim's own "a write may have changed it" is not what arrives.
            uri = "demo://resource/static/document/architecture.md"
            await client.subscribe_resource(uri)
            with anyio.fail_after(15):
                while uri not in updated:
                    await anyio.sleep(0.1)
            return sampled

    sampled = anyio.run(run)
    assert from_real(sampled) and "sampled by the agent" in text(sampled)  # the agent's answer, through the server
    assert asked and "name a colour" in asked[0]
    recorded = [json.loads(line) for line in trace.read_text().splitlines()]
    sampling = next(r for r in recorded if r["tool"] == "trigger-sampling-request")
    assert any(event.get("request") == "sampling/createMessage" for event in sampling["interactions"])
