"""Engine faults with the real model: a client that cancels or vanishes mid-call stops the decode between
tokens (the generation returns "cancelled" within a second, the next call starts at once), and
`mcp-sim call --call-timeout` stops a generation past the limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS, free_port, subprocess_env

WEATHER = SPECS / "weather.yaml"
# A slowed decode (the real model, one token per TOKEN_PAUSE_S) leaves a wide window to cancel in.
TOKEN_PAUSE_S = 0.15


class WatchedEngine(LlamaEngine):
    """The llama engine, recording when each generation starts and how and when it ends; while `slow` is
    set, each token takes TOKEN_PAUSE_S more."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.slow = False
        self.decoding = threading.Event()  # a token of the current generation came out
        self.started: list[float] = []
        self.ended: list[tuple[str, float]] = []

    def generate(self, request: GenerationRequest) -> Generation:
        self.decoding.clear()
        self.started.append(time.monotonic())
        outer = request.on_token

        def on_token(count: int) -> None:
            self.decoding.set()
            if self.slow:
                time.sleep(TOKEN_PAUSE_S)
            if outer is not None:
                outer(count)

        request.on_token = on_token
        generation = super().generate(request)
        self.ended.append((generation.finish_reason, time.monotonic()))
        return generation


@pytest.fixture(scope="module")
def engine(model_path: Path) -> WatchedEngine:
    return WatchedEngine(model_path, n_ctx=4096, n_threads=2)


@asynccontextmanager
async def http_server(engine: WatchedEngine) -> AsyncIterator[str]:
    """The real server app over streamable HTTP, in this process so the test sees the engine."""
    simulator = Simulator(load_catalog([WEATHER]), engine, SimOptions(max_tokens=256, attempts=1))
    port = free_port()
    app = create_server(simulator).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:
            await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
        server.should_exit = True


async def until_decoding(engine: WatchedEngine, calls: int) -> None:
    """Wait until the `calls`-th generation has put out a token."""
    with anyio.fail_after(120):
        while len(engine.started) < calls:
            await anyio.sleep(0.02)
        while not engine.decoding.is_set():
            await anyio.sleep(0.02)


def ended_after(engine: WatchedEngine, since: float, calls: int) -> tuple[str, float]:
    """How the `calls`-th generation ended, and how long after `since` (waits up to 5 s for it; blocks, so
    run it off the event loop that serves the calls)."""
    deadline = time.monotonic() + 5
    while len(engine.ended) < calls and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(engine.ended) >= calls, (engine.ended, engine.started, since)
    reason, at = engine.ended[calls - 1]
    return reason, at - since


@pytest.mark.anyio
async def test_a_cancelled_call_stops_decoding_and_the_next_call_starts_at_once(engine: WatchedEngine) -> None:
    async with http_server(engine) as url, Client(f"{url}?world=w", read_timeout_seconds=300) as client:
        await client.call_tool("get_weather", {"city": "Oslo"})  # reads the system prompt once
        engine.slow = True
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "get_weather", {"city": "Bergen"})
            await until_decoding(engine, 2)
            group.cancel_scope.cancel()
        cancelled_at = time.monotonic()
        engine.slow = False
        reason, after = await anyio.to_thread.run_sync(ended_after, engine, cancelled_at, 2)
        following = await client.call_tool("get_weather", {"city": "Tromso"})
    print(f"cancelled: decode stopped {after:.2f} s after the cancel, next call began "
          f"{engine.started[2] - cancelled_at:.2f} s after it")
    assert reason == "cancelled" and after < 1.0, (reason, after)
    assert engine.started[2] - cancelled_at < 2.0
    assert not following.is_error and following.meta[META_KEY]["turn"] == 2  # the cancelled call left no turn


CLIENT = """
import anyio, sys
from mcp import Client
async def main():
    async with Client(sys.argv[1], read_timeout_seconds=300) as client:
        await client.call_tool("get_weather", {"city": "Bergen"})
anyio.run(main)
"""


@pytest.mark.anyio
async def test_a_client_killed_mid_call_leaves_no_decode_running(engine: WatchedEngine) -> None:
    async with http_server(engine) as url:
        engine.slow = True
        client = subprocess.Popen([sys.executable, "-c", CLIENT, f"{url}?world=gone"], env=subprocess_env(),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        calls = len(engine.ended) + 1
        await until_decoding(engine, calls)
        os.kill(client.pid, signal.SIGKILL)  # no goodbye: the connection just drops
        client.wait()
        gone_at = time.monotonic()
        reason, after = await anyio.to_thread.run_sync(ended_after, engine, gone_at, calls)
        engine.slow = False
        async with Client(f"{url}?world=next", read_timeout_seconds=300) as other:
            following = await other.call_tool("get_weather", {"city": "Oslo"})
    print(f"killed client: decode stopped {after:.2f} s after the kill, next call began "
          f"{engine.started[calls] - gone_at:.2f} s after it")
    assert reason == "cancelled" and after < 1.0, (reason, after)
    assert engine.started[calls] - gone_at < 2.0
    assert not following.is_error


def test_call_stops_a_generation_past_the_call_timeout() -> None:
    done = CliRunner().invoke(cli, ["call", str(SPECS / "ops.yaml"), "--tool", "tail_logs", "--args",
                                    json.dumps({"service": "api", "lines": 200}), "--call-timeout", "0.5",
                                    "--max-tokens", "512", "--ctx", "4096", "--threads", "2"])
    assert done.exit_code == 1, done.output
    payload = json.loads(done.stdout)
    assert payload["isError"] and payload["_meta"][META_KEY]["stage"] == "timeout"
    assert "call timeout of 0.5 s (--call-timeout)" in payload["content"][0]["text"]
