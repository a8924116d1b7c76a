"""What the model's own process costs (--engine-process worker against inline), and what a restart after a
crash costs, on `mcp-sim serve tool_specs/weather.yaml` over stdio with the default model.

    flock /tmp/mcp-sim-model.lock .venv/bin/python benchmarks/bench_worker.py     # ~2 min on 2 cores

Per mode, ROUNDS servers: each is started with an empty folder of prompt states, initialized, then called
once (the first call: the system prompt is read) and WARM more times in one world (warm calls: the world's
prefix is reused). The worker's restart: the model process is killed with SIGSEGV between two calls, and the
next call is timed (a new process loads the model and its prompt from the store). Writes its section of
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from mcp_sim.base.defaults import PROMPT_CACHE_ENV  # noqa: E402
from tests.conftest import subprocess_env  # noqa: E402

ROUNDS = 3
WARM = 8
CITIES = ["Oslo", "Lima", "Pune", "Kobe", "Turin", "Accra", "Hanoi", "Quito", "Perth"]


def model_process(server: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if parent == server and b"mcp_sim.engines.worker.child" in command:
                return int(entry.name)
    raise RuntimeError(f"no model process under {server}")


def server_pid(marker: str) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in command and b"worker.child" not in command:
                return int(entry.name)
    raise RuntimeError("server not found")


async def one_server(mode: str, restart: bool) -> dict[str, float]:
    from mcp import Client, StdioServerParameters

    with tempfile.TemporaryDirectory(prefix="mcp-sim-prompt-states-") as states:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "mcp_sim", "serve", str(REPO / "tool_specs" / "weather.yaml"),
                                          "--engine-process", mode, "--prompt-cache-dir", states],
            env=subprocess_env(**{PROMPT_CACHE_ENV: states}))
        figures: dict[str, float] = {}
        async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
            begun = time.perf_counter()
            first = await client.call_tool("get_weather", {"city": "Bern"})
            figures["first"] = time.perf_counter() - begun
            assert not first.is_error, first.content
            warm = []
            for city in CITIES[:WARM]:
                begun = time.perf_counter()
                result = await client.call_tool("get_weather", {"city": city})
                warm.append(time.perf_counter() - begun)
                assert not result.is_error, result.content
            figures["warm"] = statistics.median(warm)
            if restart:
                os.kill(model_process(server_pid(states)), signal.SIGSEGV)
                time.sleep(0.5)  # the server sees the death before the next call
                begun = time.perf_counter()
                again = await client.call_tool("get_weather", {"city": "Riga"})
                figures["restart"] = time.perf_counter() - begun
                assert not again.is_error, again.content
        return figures


def main() -> None:
    import anyio

    runs: dict[str, list[dict[str, float]]] = {"inline": [], "worker": []}
    for _ in range(ROUNDS):
        for mode in runs:  # alternated, so that a change in the machine's load falls on both
            runs[mode].append(anyio.run(one_server, mode, mode == "worker"))
    median = {mode: {key: statistics.median(run[key] for run in found) for key in found[0]}
              for mode, found in runs.items()}
    inline, worker = median["inline"], median["worker"]
    lines = ["| | inline s | worker s | worker / inline |", "| --- | --- | --- | --- |",
             f"| first call | {inline['first']:.3f} | {worker['first']:.3f} | "
             f"{worker['first'] / inline['first']:.3f} |",
             f"| warm call (median of {WARM}) | {inline['warm']:.3f} | {worker['warm']:.3f} | "
             f"{worker['warm'] / inline['warm']:.3f} |",
             f"| first call after a SIGSEGV of the model process | | {worker['restart']:.3f} | "
             f"{worker['restart'] / worker['warm']:.1f}x a warm call |"]
    text = "\n".join(lines) + (
        f"\n\nMedians of {ROUNDS} servers per mode (`mcp-sim serve tool_specs/weather.yaml` over stdio, default "
        "model, a fresh prompt store each), the modes alternated. Machine load: " + machine_load() + ".")
    print(text)
    write_section("worker", "The model's own process (bench_worker.py)", text)


if __name__ == "__main__":
    main()
