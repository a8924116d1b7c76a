"""Memory over a long run: 2,000 calls across 200 worlds against a real `mcp-sim serve`, fewer worlds kept
(--max-worlds) and a small state cache (--state-cache-mb); the server's RSS at the end stays within the
model, those bounds and a fixed allowance.

The real model answers one call in ten (200 calls, in every world); fixtures pinned in the spec answer the
rest, so the run takes minutes, not the ~12 the model alone would need here. Marked `soak`: .ci/run runs it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client

from mcp_sim.core.simulator import META_KEY
from tests.conftest import free_port, mcp_sim_command, stop, subprocess_env, wait_for_port

pytestmark = [pytest.mark.soak, pytest.mark.anyio]

WORLDS, ROUNDS, CLIENTS = 200, 10, 8
MODEL_ROUND = 1  # the round whose calls the model answers (one in ten)
MAX_WORLDS, STATE_CACHE_MB = 50, 64
# Python objects, the HTTP stack and allocator slack on top of what the first calls used.
ALLOWANCE_MB = 96
SPEC = {
    "world": {"description": "An append-only event log."},
    "tools": [
        {"name": "log_event", "description": "Append one event to the log.",
         "inputSchema": {"type": "object", "properties": {"world": {"type": "string"}, "seq": {"type": "integer"}},
                         "required": ["world", "seq"]},
         "outputSchema": {"type": "object", "properties": {"accepted": {"type": "boolean"}},
                          "required": ["accepted"]},
         "x-sim": {"fixtures": [{"match": {"schema": {"properties": {"seq": {"not": {"const": MODEL_ROUND}}}}},
                                 "result": {"accepted": True}}]}}],
}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[int, str]]:
    spec = tmp_path / "log.yaml"
    spec.write_text(yaml.safe_dump(SPEC, sort_keys=False), encoding="utf-8")
    port = free_port()
    command = mcp_sim_command("serve", str(spec), "--transport", "http", "--port", str(port), "--max-tokens", "16",
                              "--ctx", "2048", "--max-worlds", str(MAX_WORLDS), "--state-cache-mb", str(STATE_CACHE_MB))
    # Each dropped world logs a line: into a file, as a pipe nobody reads fills and stalls the server.
    with (tmp_path / "serve.log").open("wb") as log:
        process = subprocess.Popen(command, env=subprocess_env(), stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_for_port(port, process)
            yield process.pid, f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(process)


async def one_client(url: str, worlds: list[str], seq: int, sources: dict[str, int]) -> None:
    async with Client(url, read_timeout_seconds=600) as client:
        for world in worlds:
            result = await client.call_tool("log_event", {"world": world, "seq": seq}, meta={"mcp-sim/world": world})
            simulation: dict[str, Any] = result.meta[META_KEY]
            assert not result.is_error and simulation["world"] == world, result.content
            sources[simulation["source"]] = sources.get(simulation["source"], 0) + 1


async def test_two_thousand_calls_across_two_hundred_worlds_stay_in_bounds(
        server: tuple[int, str], capsys: pytest.CaptureFixture[str]) -> None:
    pid, url = server
    names = [f"w{number:03d}" for number in range(WORLDS)]
    sources: dict[str, int] = {}
    started = time.perf_counter()
    baseline = 0.0
    for seq in range(ROUNDS):  # every world gets one call a round, the worlds interleaved across clients
        async with anyio.create_task_group() as group:
            for client in range(CLIENTS):
                group.start_soon(one_client, url, names[client::CLIENTS], seq, sources)
        if seq == MODEL_ROUND:
            baseline = rss_mb(pid)  # the model loaded and in use, the state cache filling
    elapsed = time.perf_counter() - started
    final = rss_mb(pid)
    assert sources == {"fixture": WORLDS * (ROUNDS - 1), "model": WORLDS}
    assert final <= baseline + STATE_CACHE_MB + ALLOWANCE_MB, (baseline, final)
    with capsys.disabled():
        print(f"\nsoak: {sum(sources.values())} calls across {WORLDS} worlds in {elapsed:.0f} s ({sources}); "
              f"RSS {baseline:.0f} MB after round {MODEL_ROUND + 1}, {final:.0f} MB at the end "
              f"(--max-worlds {MAX_WORLDS}, --state-cache-mb {STATE_CACHE_MB})")
