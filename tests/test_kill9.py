"""kill -9 in the middle of a run that writes worlds (--state-dir), a response cache (--cache) and traces
(`mcp-sim record`), all real processes with the real model: every record written before the kill is
intact, the files open cleanly, and a restarted server continues the world and replays from the cache.
(The ledger has the same test in test_bad_day_model.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.fidelity.traces import read_traces
from mcp_sim.rehearsal.cache import ResponseCache
from mcp_sim.simulator import META_KEY
from mcp_sim.worlds import Worlds
from mcp_sim.worlds.store import SqliteStore
from tests.conftest import free_port, mcp_sim_command, start_http_server, stop, subprocess_env, wait_for_port
from tests.test_load import write_spec

pytestmark = pytest.mark.anyio

ANSWERED = 5


def start_recorded_server(spec: Path, state: Path, cache: Path, traces: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`mcp-sim record` over HTTP in front of `mcp-sim serve --state-dir --cache` on stdio, in a process
    group of its own so one kill -9 takes both."""
    port = free_port()
    served = mcp_sim_command("serve", str(spec), "--state-dir", str(state), "--cache", str(cache),
                             "--max-tokens", "16", "--ctx", "2048")
    process = subprocess.Popen(
        mcp_sim_command("record", "--out", str(traces), "--session", "run", "--transport", "http", "--port",
                        str(port), "--", *served),
        env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    wait_for_port(port, process, timeout=120)
    return process, f"http://127.0.0.1:{port}/mcp"


async def calls_then_kill(url: str, group_id: int) -> None:
    """ANSWERED calls, then a kill -9 of the whole group while one more call (and its writes) is in flight."""
    with anyio.fail_after(300):
        async with Client(url, read_timeout_seconds=300) as client:
            for seq in range(ANSWERED):
                result = await client.call_tool("log_event", {"client": "c", "seq": seq})
                assert not result.is_error, result.content
    try:
        with anyio.fail_after(60):
            async with Client(url, read_timeout_seconds=300) as client, anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "log_event", {"client": "c", "seq": ANSWERED})
                await anyio.sleep(0.3)
                os.killpg(group_id, signal.SIGKILL)
    except Exception:  # the call in flight dies with the server, as it should
        pass


def world_calls(state: Path) -> list[dict[str, Any]]:
    import json

    worlds = Worlds(store=SqliteStore(state))
    try:
        turns = worlds.export(worlds.existing("default"))["history"]
    finally:
        worlds.close()
    return [json.loads(turn["action"])["arguments"] for history in turns.values() for turn in history]


async def test_kill_9_mid_run_keeps_worlds_cache_and_traces_whole(tmp_path: Path) -> None:
    spec, state, cache, traces = write_spec(tmp_path), tmp_path / "state", tmp_path / "c.db", tmp_path / "t.jsonl"
    process, url = start_recorded_server(spec, state, cache, traces)
    try:
        await calls_then_kill(url, os.getpgid(process.pid))
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    expected = [{"client": "c", "seq": seq} for seq in range(ANSWERED)]
    recorded = read_traces([traces])  # every line whole: a torn one would raise naming the file and line
    assert [record.arguments for record in recorded][:ANSWERED] == expected and len(recorded) <= ANSWERED + 1
    in_world = world_calls(state)
    assert in_world[:ANSWERED] == expected and len(in_world) <= ANSWERED + 1
    with ResponseCache(cache, create=False) as stored:
        assert stored.stats()["entries"] >= ANSWERED
    assert CliRunner().invoke(cli, ["cache", "stats", str(cache)]).exit_code == 0
    restarted, again = start_http_server(str(spec), "--state-dir", str(state), "--cache", str(cache),
                                         "--max-tokens", "16", "--ctx", "2048")
    try:
        async with Client(again, read_timeout_seconds=300) as client:
            continued = await client.call_tool("log_event", {"client": "c", "seq": 99})
        async with Client(f"{again}?world=fresh", read_timeout_seconds=300) as client:
            replayed = await client.call_tool("log_event", {"client": "c", "seq": 0})
    finally:
        stop(restarted)
    assert continued.meta[META_KEY]["turn"] == len(in_world) + 1  # the default world went on where it was
    assert replayed.meta[META_KEY]["source"] == "cache"  # the first call's stored answer, read back
