"""What a cache hit costs inside the server: `_meta.latency_ms` of replayed calls, through the real MCP layer.

    .venv/bin/python benchmarks/bench_replay.py                     # 10 worlds x 30 calls
    .venv/bin/python benchmarks/bench_replay.py --worlds 20 --calls 50

A scripted engine records the answers (what answered does not change what a hit costs); a fresh simulator
then replays them with --replay-only semantics through `create_server` and an in-process `mcp.Client`.
latency_ms is the simulator's own clock for one call: validation, the world, the key over the world's
history, the SQLite read, the history record. The world's history grows by one turn per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.app import assemble  # noqa: E402
from mcp_sim.core.simulator import META_KEY, Simulator  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.rehearsal.setup import RehearsalSettings  # noqa: E402
from mcp_sim.serving.server import create_server  # noqa: E402
from tests.scripted import ScriptedEngine  # noqa: E402

SPEC = REPO / "tool_specs" / "weather.yaml"


def city(world: int, call: int) -> str:
    return f"City {world}-{call}"


def answer(name: str) -> str:
    return json.dumps({"city": name, "temperature": 4.5, "conditions": "cloudy", "humidity": 81,
                       "wind_speed": 12.0, "units": "metric"})


def simulator(cache: Path, engine: ScriptedEngine, replay_only: bool) -> Simulator:
    return assemble(load_catalog([SPEC]), engine, rehearsal=RehearsalSettings(cache=cache, replay_only=replay_only))


def record(cache: Path, worlds: int, calls: int) -> None:
    names = [city(w, c) for w in range(worlds) for c in range(calls)]
    sim = simulator(cache, ScriptedEngine(*map(answer, names)), replay_only=False)
    for w in range(worlds):
        for c in range(calls):
            sim.simulate("get_weather", {"city": city(w, c)}, f"world-{w}")


async def replay(cache: Path, worlds: int, calls: int) -> tuple[list[float], list[float]]:
    sim = simulator(cache, ScriptedEngine(), replay_only=True)
    inside, round_trip = [], []
    async with Client(create_server(sim)) as client:
        for w in range(worlds):
            for c in range(calls):
                started = time.perf_counter()
                result = await client.call_tool("get_weather", {"city": city(w, c)},
                                                meta={"mcp-sim/world": f"world-{w}"})
                round_trip.append((time.perf_counter() - started) * 1000)
                meta = (result.meta or {})[META_KEY]
                assert meta["source"] == "cache", meta
                inside.append(meta["latency_ms"])
    return inside, round_trip


def row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<36} {statistics.median(ordered):>7.2f} {p99:>7.2f} {ordered[-1]:>7.2f}   n={len(ordered)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=30, help="calls per world (its history grows to this)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "replay.db"
        record(cache, args.worlds, args.calls)
        inside, round_trip = anyio.run(replay, cache, args.worlds, args.calls)
    print(f"{'ms':<36} {'p50':>7} {'p99':>7} {'max':>7}")
    print(row("hit inside the server (latency_ms)", inside))
    print(row("hit, in-process client round trip", round_trip))


if __name__ == "__main__":
    main()
