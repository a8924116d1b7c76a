"""Warm start: what the first call costs after a server has been up and idle for a while (issue 14).

    .venv/bin/python benchmarks/bench_warm.py            # ~3 min on 2 cores
    .venv/bin/python benchmarks/bench_warm.py --idle 30 --later 3

Serves tool_specs/crm.yaml over streamable HTTP (--ctx 5120 --max-tokens 256, temperature 0) twice in one
run: `cold` (--no-warm-start: the model loads before serving, the first call reads the ~3.4k-token system
prompt) and `warm` (the default: the model loads and the system prompt is read in the background). Each
server sits idle for --idle seconds after its port opens, then answers one world's first call and --later
calls after it. Also records how long the port took to open. Writes its section of docs/BENCHMARKS.md.
Target: the first call costs no more than 1.2x a later call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from tests.conftest import start_http_server, stop  # noqa: E402

SPEC = REPO / "tool_specs" / "crm.yaml"
SERVE_ARGS = ("--ctx", "5120", "--max-tokens", "256", "--temperature", "0")
MODES = {"cold": ("--no-warm-start",), "warm": ()}


def arguments(index: int) -> dict[str, Any]:
    return {"customer_id": f"C-100{index % 5 + 1}", "priority": "normal",
            "subject": f"Order question number {index}: where is parcel {1000 + 37 * index}?"}


def run(mode: str, idle: float, later: int) -> dict[str, Any]:
    import anyio
    from mcp import Client

    started = time.perf_counter()
    process, url = start_http_server(str(SPEC), *SERVE_ARGS, *MODES[mode])
    port_open = time.perf_counter() - started
    seconds: list[float] = []
    try:
        time.sleep(idle)

        async def calls() -> None:
            async with Client(url, mode="legacy", read_timeout_seconds=900) as client:
                for index in range(later + 1):
                    begun = time.perf_counter()
                    result = await client.call_tool("create_ticket", arguments(index))
                    assert not result.is_error, result.content
                    seconds.append(time.perf_counter() - begun)
                    print(f"{mode}: call {index + 1}: {seconds[-1]:.2f} s", flush=True)

        anyio.run(calls)
    finally:
        stop(process)
    return {"mode": mode, "port_open": port_open, "first": seconds[0], "later": statistics.mean(seconds[1:])}


def report(rows: list[dict[str, Any]], idle: float, load: str) -> str:
    lines = ["| mode | port open s | first call s | later calls s (mean) | first / later |",
             "| --- | --- | --- | --- | --- |"]
    for row in rows:
        lines.append(f"| {row['mode']} | {row['port_open']:.1f} | {row['first']:.2f} | {row['later']:.2f} | "
                     f"{row['first'] / row['later']:.2f}x |")
    lines.append(f"\nEach server idle {idle:.0f} s after its port opened; target first / later <= 1.2x. "
                 f"Measured in one run; machine load: {load}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--later", type=int, default=3)
    parser.add_argument("--modes", default="cold,warm")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args()
    load = machine_load()
    rows = [run(mode, args.idle, args.later) for mode in args.modes.split(",")]
    text = report(rows, args.idle, f"{load} at the start, {machine_load()} at the end")
    print(text)
    if not args.no_write:
        write_section("warm", "Warm start (crm.yaml over HTTP, first call after the server sat idle)", text)


if __name__ == "__main__":
    main()
