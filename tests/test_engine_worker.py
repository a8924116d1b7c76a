"""The model in a process of its own (mcp_sim/engines/worker), with the real model and real servers: a
SIGSEGV or SIGKILL of the model process in the middle of a call ends that call with an isError naming the
signal, the server stays up and answers the next call from a new model process, and the world keeps every
call answered before. A model process that dies again and again is not restarted for ever."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from mcp_sim.base.errors import EngineError
from mcp_sim.core.worlds import Worlds
from mcp_sim.core.worlds.sqlite_store import SqliteStore
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.exits import CrashLog, describe_exit
from mcp_sim.engines.llama.kind import LLAMA
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.engines.worker import WorkerEngine
from tests.conftest import SPECS, start_http_server, stop, subprocess_env

pytestmark = pytest.mark.anyio

WEATHER = SPECS / "weather.yaml"
CHILD = b"mcp_sim.engines.worker.child"


def model_processes(server: int) -> list[int]:
    """The model processes that SERVER started (its children running the worker's module)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if parent == server and CHILD in command:
            found.append(int(entry.name))
    return found


def world_calls(state: Path) -> list[dict[str, Any]]:
    worlds = Worlds(store=SqliteStore(state))
    try:
        turns = worlds.export(worlds.existing("default"))["history"]
    finally:
        worlds.close()
    return [json.loads(turn["action"])["arguments"] for history in turns.values() for turn in history]


@asynccontextmanager
async def served(transport: str, state: Path) -> AsyncIterator[tuple[Client, Callable[[], int]]]:
    """A client of a real `mcp-sim serve` (its defaults: the model in a worker) and the server's pid."""
    args = [str(WEATHER), "--state-dir", str(state), "--max-tokens", "200", "--attempts", "1"]
    if transport == "http":
        process, url = start_http_server(*args)
        try:
            async with Client(url, read_timeout_seconds=300) as client:
                yield client, lambda: process.pid
        finally:
            stop(process)
    else:
        params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", *args],
                                       env=subprocess_env())
        async with Client(params, mode="legacy", read_timeout_seconds=300) as client:
            yield client, lambda: _server_serving(state)


def _server_serving(state: Path) -> int:
    """The pid of the stdio server the client started (the one whose --state-dir is STATE)."""
    marker = b"--state-dir\0" + str(state).encode()
    [pid] = [int(p.name) for p in Path("/proc").iterdir()
             if p.name.isdigit() and marker in _cmdline(int(p.name)) and CHILD not in _cmdline(int(p.name))]
    return pid


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize(("transport", "killed_by"), [("http", signal.SIGSEGV), ("stdio", signal.SIGKILL)])
async def test_a_model_process_killed_mid_call_ends_that_call_and_the_server_keeps_serving(
        tmp_path: Path, transport: str, killed_by: signal.Signals) -> None:
    state = tmp_path / "state"
    async with served(transport, state) as (client, server_pid):
        with anyio.fail_after(300):
            first = await client.call_tool("get_weather", {"city": "Paris"})
            assert not first.is_error, first.content
            [worker] = model_processes(server_pid())
            killed: list[int] = []

            async def kill_on_first_token(value: float, total: float | None, message: str | None) -> None:
                if not killed:  # a token was decoded: the model process is in the middle of the call
                    killed.append(worker)
                    os.kill(worker, killed_by)

            crashed = await client.call_tool("get_forecast", {"city": "Oslo", "days": 3},
                                             progress_callback=kill_on_first_token)
            assert killed, "no progress came while the model decoded"
            assert crashed.is_error
            text = crashed.content[0].text
            assert killed_by.name in text and "model process" in text and "keeps serving" in text, text
            again = await client.call_tool("get_weather", {"city": "Rome"})
            assert not again.is_error, again.content
            [restarted] = model_processes(server_pid())
            assert restarted != worker
    calls = world_calls(state)
    assert {"city": "Paris"} in calls and {"city": "Rome"} in calls
    assert calls.index({"city": "Paris"}) < calls.index({"city": "Rome"})


def test_a_model_process_that_keeps_dying_is_not_restarted_for_ever(model_path: Path) -> None:
    settings = EngineSettings(model=str(model_path))
    choice = LLAMA.choose(settings, download=False)
    engine = WorkerEngine("llama", settings, choice, 2048, LLAMA.build(settings, choice, 2048),
                          crashes=CrashLog(limit=2, window_s=300))
    request = GenerationRequest([ChatMessage("user", "Say hi.")], max_tokens=4)
    try:
        assert engine.generate(request).text is not None
        crash(engine)
        assert engine.generate(request).text is not None  # restarted
        crash(engine)  # the second death within the window
        started = time.monotonic()
        with pytest.raises(EngineError, match=r"died 2 times in 300 s \(last: SIGSEGV"):
            engine.generate(request)
        assert time.monotonic() - started < 1  # fails fast: no new process, no model load
        assert engine.restarts == 1
    finally:
        engine.close()


def crash(engine: WorkerEngine) -> None:
    pid = engine.pid
    assert pid is not None
    os.kill(pid, signal.SIGSEGV)
    deadline = time.monotonic() + 30
    while engine.pid == pid and time.monotonic() < deadline:
        time.sleep(0.05)


def test_exit_statuses_say_what_happened_and_what_to_try() -> None:
    assert describe_exit(-signal.SIGSEGV).startswith("SIGSEGV (a native crash inside llama.cpp")
    assert "--cpu-repack off" in describe_exit(-signal.SIGSEGV)
    assert "out-of-memory" in describe_exit(-signal.SIGKILL)
    assert "GGML_ASSERT" in describe_exit(-signal.SIGABRT)
    assert describe_exit(3).startswith("exit status 3")
    crashes = CrashLog(limit=2, window_s=0.2)
    crashes.record("SIGSEGV")
    assert crashes.refusal() is None
    crashes.record("SIGSEGV")
    assert "died 2 times" in (crashes.refusal() or "")
    time.sleep(0.25)
    assert crashes.refusal() is None  # the window passed: it may start again
