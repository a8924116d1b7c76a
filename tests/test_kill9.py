"""kill -9 in the middle of a run that writes worlds (--state-dir), a response cache (--cache) and traces
(`mcp-sim record`), all real processes with the real model: every record written before the kill is
intact, the files open cleanly, and a restarted server continues the world and replays from the cache.
(The ledger has the same test in test_bad_day_model.py.)"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY
from mcp_sim.core.worlds import Worlds
from mcp_sim.core.worlds.sqlite_store import SqliteStore
from mcp_sim.rehearsal.cache import ResponseCache
from mcp_sim.rehearsal.traces import read_traces
from tests.conftest import free_port, mcp_sim_command, start_http_server, stop, subprocess_env, wait_for_port
from tests.test_load import write_spec

pytestmark = pytest.mark.anyio

ANSWERED = 5
# The call in flight at the kill is held this long before the model answers it, so it cannot be committed
# before the kill, and a real server that outlived the kill would commit it well within wait_gone's patience.
HELD_MS = 3000
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def start_recorded_server(spec: Path, state: Path, cache: Path, traces: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`mcp-sim record` over HTTP in front of `mcp-sim serve --state-dir --cache` on stdio."""
    port = free_port()
    faults = spec.with_name("faults.yaml")
    faults.write_text(json.dumps({"faults": [{"tool": "log_event", "kind": "latency", "nth": ANSWERED + 1,
                                              "ms": HELD_MS}]}), encoding="utf-8")
    served = mcp_sim_command("serve", str(spec), "--state-dir", str(state), "--cache", str(cache),
                             "--faults", str(faults), "--max-tokens", "16", "--ctx", "2048")
    process = subprocess.Popen(
        mcp_sim_command("record", "--out", str(traces), "--session", "run", "--transport", "http", "--port",
                        str(port), "--", *served),
        env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    wait_for_port(port, process, timeout=120)
    return process, f"http://127.0.0.1:{port}/mcp"


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the command name in parentheses may hold spaces


def real_server(recorder: int) -> int:
    """The `mcp-sim serve` process the recorder started. The SDK starts it in a session of its own, so a kill
    of the recorder's process group leaves it running: it would then finish the call in flight and commit it."""
    children = [int(entry.name) for entry in Path("/proc").iterdir()
                if entry.name.isdigit() and parent_of(int(entry.name)) == recorder]
    served = [pid for pid in children if b"serve" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    assert len(served) == 1, f"expected one real server under the recorder {recorder}, found {served}"
    return served[0]


@contextlib.contextmanager
def adopting_orphans() -> Iterator[None]:
    """Make this process the child subreaper (Linux), so the real server, orphaned when the recorder dies,
    becomes our child and its exit status can be read: the proof that kill -9 and nothing else ended it."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def kill_9(*pids: int) -> None:
    for pid in pids:
        os.killpg(os.getpgid(pid), signal.SIGKILL)


def exit_status(pid: int, timeout: float = 30) -> int:
    """The wait status of PID, once it has ended and (as an orphan) become our child."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            waited, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not ours: another process reaped it
            waited = 0
        if waited:
            return status
        time.sleep(0.05)
    parent = parent_of(pid)
    raise AssertionError(f"process {pid} still running {timeout} s after the kill, child of {parent}" if parent
                         else f"process {pid} ended, but its exit status went to another process")


async def calls_then_kill(url: str, recorder: subprocess.Popen[bytes], server: int) -> None:
    """ANSWERED calls, then a kill -9 of the real server and the recorder while one more call (and its writes)
    is in flight."""
    with anyio.fail_after(300):
        async with Client(url, read_timeout_seconds=300) as client:
            for seq in range(ANSWERED):
                result = await client.call_tool("log_event", {"client": "c", "seq": seq})
                assert not result.is_error, result.content

    async def call_in_flight(client: Client) -> None:
        with contextlib.suppress(Exception):  # the call in flight dies with the server, as it should
            await client.call_tool("log_event", {"client": "c", "seq": ANSWERED})

    killed = False
    try:
        with anyio.fail_after(60):
            async with Client(url, read_timeout_seconds=300) as client, anyio.create_task_group() as group:
                group.start_soon(call_in_flight, client)
                await anyio.sleep(0.3)
                # The recorder first, and gone (reaped) before the server is killed: a recorder that is still
                # dying can reap the dead server itself (its child watcher waits in waitpid), and the server's
                # exit status never reaches us (CI runs waited 30 s for it). Its kill happens whatever the call
                # does: a call that fails at once must not cancel it. The held call cannot commit meanwhile.
                kill_9(recorder.pid)
                recorder.wait(timeout=30)
                kill_9(server)
                killed = True
    except Exception:
        if not killed:  # only the connection may fail, dying with the recorder; a failed kill is the test's
            raise
    status = exit_status(server)  # killed, not left to finish the call in flight and commit it
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"real server wait status {status}"


def world_calls(state: Path) -> list[dict[str, Any]]:
    worlds = Worlds(store=SqliteStore(state))
    try:
        turns = worlds.export(worlds.existing("default"))["history"]
    finally:
        worlds.close()
    return [json.loads(turn["action"])["arguments"] for history in turns.values() for turn in history]


async def test_kill_9_mid_run_keeps_worlds_cache_and_traces_whole(tmp_path: Path) -> None:
    spec, state, cache, traces = write_spec(tmp_path), tmp_path / "state", tmp_path / "c.db", tmp_path / "t.jsonl"
    with adopting_orphans():
        process, url = start_recorded_server(spec, state, cache, traces)
        try:
            await calls_then_kill(url, process, real_server(process.pid))
        finally:
            process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    expected = [{"client": "c", "seq": seq} for seq in range(ANSWERED)]
    recorded = read_traces([traces])  # every line whole: a torn one would raise naming the file and line
    assert [record.arguments for record in recorded] == expected
    in_world = world_calls(state)
    assert in_world == expected  # the call in flight died with the real server, uncommitted
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
