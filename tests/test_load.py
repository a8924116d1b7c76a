"""Load with the real model: 16 concurrent HTTP clients x 25 calls against a real `mcp-sim serve`, once with
calls answered one at a time and once decoded together (`--slots 16`). Nothing is lost, duplicated or
crossed: every world's exported history holds exactly its own calls, in order; no client is starved.

Marked `load`: ./scripts/test leaves it out, .ci/run runs it after the suite."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from mcp import Client

from mcp_sim.core.simulator import META_KEY
from tests.conftest import start_http_server, stop

pytestmark = [pytest.mark.load, pytest.mark.anyio]

CLIENTS, CALLS = 16, 25
LEGACY = 4  # of the clients, these keep a 2025-11-25 session (its own world) instead of naming a world
LOG_SPEC = {
    "world": {"description": "An append-only event log shared by many writers."},
    "tools": [{
        "name": "log_event", "description": "Append one event to the log; returns whether it was accepted.",
        "inputSchema": {"type": "object", "properties": {"client": {"type": "string"}, "seq": {"type": "integer"}},
                        "required": ["client", "seq"], "additionalProperties": False},
        "outputSchema": {"type": "object", "properties": {"accepted": {"type": "boolean"}},
                         "required": ["accepted"]}}],
}


def write_spec(directory: Path) -> Path:
    path = directory / "log.yaml"
    path.write_text(yaml.safe_dump(LOG_SPEC, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(params=[1, CLIENTS], ids=lambda slots: f"slots-{slots}")
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    process, url = start_http_server(str(write_spec(tmp_path)), "--max-tokens", "32", "--ctx", "4096",
                                     "--max-queue", str(CLIENTS * 2), "--slots", str(request.param))
    try:
        yield url
    finally:
        stop(process)


async def one_client(url: str, number: int, seen: dict[str, list[Any]], latencies: dict[str, list[float]]) -> None:
    """25 calls in order; remembers which world answered each (a legacy client's world is its session's)."""
    name = f"client-{number:02d}"
    legacy = number < LEGACY
    target = url if legacy else f"{url}?world={name}"
    async with Client(target, mode="legacy" if legacy else "auto", read_timeout_seconds=600) as client:
        for seq in range(CALLS):
            started = time.perf_counter()
            result = await client.call_tool("log_event", {"client": name, "seq": seq})
            latencies.setdefault(name, []).append(time.perf_counter() - started)
            assert not result.is_error, result.content
            seen.setdefault(name, []).append(result.meta[META_KEY]["world"])


def exported_calls(root: str, world: str) -> list[dict[str, Any]]:
    """The arguments of every call in the world's history, as the admin route exports them."""
    response = httpx.get(f"{root}/admin/worlds/{world}", timeout=30)
    response.raise_for_status()
    history = response.json()["history"]
    return [json.loads(turn["action"])["arguments"] for turns in history.values() for turn in turns]


async def test_sixteen_clients_lose_duplicate_and_cross_nothing(server: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, list[Any]] = {}
    per_client: dict[str, list[float]] = {}
    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for number in range(CLIENTS):
            group.start_soon(one_client, server, number, seen, per_client)
    elapsed = time.perf_counter() - started
    latencies = [latency for values in per_client.values() for latency in values]
    root = server.rsplit("/mcp", 1)[0]
    lengths = []
    for name, worlds in seen.items():
        assert len(worlds) == CALLS and len(set(worlds)) == 1, (name, set(worlds))  # one world per client
        world = worlds[0]
        assert world == name or (world.startswith("session:") and name < f"client-{LEGACY:02d}"), world
        calls = exported_calls(root, world)
        assert calls == [{"client": name, "seq": seq} for seq in range(CALLS)], (world, calls)
        lengths.append(len(calls))
    assert len({worlds[0] for worlds in seen.values()}) == CLIENTS  # no two clients shared a world
    listed = httpx.get(f"{root}/admin/worlds", timeout=30).json()
    assert sum(entry["calls"] for entry in listed) == CLIENTS * CALLS  # nothing answered anywhere else
    # Fair turns: no client's calls took far longer on average than the typical client's (loose: not a timing
    # target, a starvation check; the measured ratio is in docs/BENCHMARKS.md).
    means = [statistics.mean(values) for values in per_client.values()]
    worst = max(means) / statistics.median(means)
    assert worst < 2.0, f"a client waited {worst:.2f}x the median"
    with capsys.disabled():
        print(f"\nload: {CLIENTS} clients x {CALLS} calls in {elapsed:.1f} s = {len(latencies) / elapsed:.2f} "
              f"calls/s; latency p50 {statistics.median(latencies):.2f} s, "
              f"p95 {statistics.quantiles(latencies, n=20)[18]:.2f} s; worst client mean {worst:.2f}x the median; "
              f"longest world history {max(lengths)}")
