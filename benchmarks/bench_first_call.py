"""The first call of `./scripts/serve` (every shipped spec over stdio): how long after the server starts, and
how long the call itself takes, with the call's spec read first and the others in the background.

    .venv/bin/python benchmarks/bench_first_call.py        # ~1 min on 2 cores

Starts `mcp-sim serve tool_specs/` over stdio as `./scripts/serve` does, initializes, and calls get_weather
at once; twice, with one empty folder of prompt states: the first start reads the system prompt, the restart
loads what the first one saved (--prompt-cache-dir). Writes its section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from mcp_sim.base.defaults import PROMPT_CACHE_ENV  # noqa: E402
from tests.conftest import subprocess_env  # noqa: E402


async def first_call(prompt_states: str) -> tuple[float, float, float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", str(REPO / "tool_specs")],
                                   env=subprocess_env(**{PROMPT_CACHE_ENV: prompt_states}))
    started = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=900) as client:
        ready = time.perf_counter() - started
        begun = time.perf_counter()
        result = await client.call_tool("get_weather", {"city": "Oslo"})
        call = time.perf_counter() - begun
        assert not result.is_error, result.content
    return ready, call, ready + call


def main() -> None:
    import anyio

    lines = ["| start | initialized s | first call s | from start s |", "| --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory(prefix="mcp-sim-prompt-states-") as prompt_states:
        for start in ("first (reads the prompt)", "restart (loads it)"):
            ready, call, total = anyio.run(first_call, prompt_states)
            lines.append(f"| {start} | {ready:.1f} | {call:.1f} | {total:.1f} |")
    text = "\n".join(lines) + (
        "\n\n`mcp-sim serve tool_specs/` (4 specs) over stdio, get_weather called as soon as the server answered "
        f"`initialize`. Machine load: {machine_load()}.")
    print(text)
    write_section("first-call", "The first call of ./scripts/serve (bench_first_call.py)", text)


if __name__ == "__main__":
    main()
