"""Continuous batching in-process: N sessions calling at once, one call at a time against --slots (issue 14).

    .venv/bin/python benchmarks/bench_batching.py          # ~3 min on 2 cores

Both engines serve the files spec (warm system prompt, temperature 0, --ctx 4096 per slot); each of N
threads is one session making --calls calls in its own world. No HTTP and no client in the process, so the
figures are the engine's own; bench_sessions.py measures the same over streamable HTTP. Every llama_decode
is timed, giving the profile: milliseconds per token fed, by how many tokens a step carried.
Writes its section of docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402
from mcp_sim.serving.warmup import Warmup  # noqa: E402

SPEC = REPO / "tool_specs" / "files.yaml"
CTX = 4096


def timed_decode(steps: list[tuple[int, float]]) -> Any:
    """Wrap llama_decode (the batched path calls it by module attribute) to record (tokens, seconds)."""
    import llama_cpp

    original = llama_cpp.llama_decode

    def decode(ctx: Any, batch: Any) -> int:
        started = time.perf_counter()
        code = original(ctx, batch)
        steps.append((batch.n_tokens, time.perf_counter() - started))
        return int(code)

    llama_cpp.llama_decode = decode
    return original


def run(slots: int, sessions: int, calls: int, threads: int) -> dict[str, Any]:
    catalog = load_catalog([SPEC])
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=threads, slots=slots)
    simulator = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=96, attempts=1))
    engine.warm(Warmup(simulator).system_prompts())
    per_session: dict[int, list[float]] = defaultdict(list)
    tokens = {"evaluated": 0, "generated": 0}

    def session(number: int) -> None:
        for index in range(calls):
            started = time.perf_counter()
            result = simulator.simulate("write_file", {"path": f"/s{number}/note-{index}.txt",
                                                       "content": f"note {index}"}, world=f"s{number}")
            per_session[number].append(time.perf_counter() - started)
            assert not result.is_error, result.text
            tokens["evaluated"] += result.meta[META_KEY]["evaluated_tokens"]
            tokens["generated"] += result.meta[META_KEY]["completion_tokens"]

    steps: list[tuple[int, float]] = []
    import llama_cpp

    original = timed_decode(steps)
    started = time.perf_counter()
    workers = [threading.Thread(target=session, args=(number,)) for number in range(sessions)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    llama_cpp.llama_decode = original
    engine.close()
    means = [statistics.mean(values) for values in per_session.values()]
    return {"slots": slots, "sessions": sessions, "calls": sessions * calls, "seconds": elapsed,
            "calls_per_s": sessions * calls / elapsed,
            "p50": statistics.median([v for values in per_session.values() for v in values]),
            "worst": max(means) / statistics.median(means), "steps": steps,
            "evaluated": tokens["evaluated"] / (sessions * calls),
            "generated": tokens["generated"] / (sessions * calls)}


def profile(steps: list[tuple[int, float]]) -> str:
    """ms per token fed, for steps of one token, of 2-16 tokens (answering calls together), and longer
    (prompt chunks)."""
    groups: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for count, seconds in steps:
        groups["1" if count == 1 else "2-16" if count <= 16 else "17+"].append((count, seconds))
    parts = []
    for name in ("1", "2-16", "17+"):
        rows = groups.get(name)
        if rows:
            fed = sum(count for count, _ in rows)
            per_token = sum(s for _, s in rows) / fed * 1000
            parts.append(f"{name} tokens: {per_token:.1f} ms/token over {len(rows)} steps")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", default="1,16")
    parser.add_argument("--slots", default="1,16")
    parser.add_argument("--calls", type=int, default=6, help="calls per session")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each setting, in turn; the fastest counts")
    args = parser.parse_args()
    threads = default_threads() or 2
    load_before = machine_load()
    settings = [(slots, sessions) for slots in map(int, args.slots.split(","))
                for sessions in map(int, args.sessions.split(","))]
    # Settings take turns, so a burst of load on this shared machine does not land on one setting alone.
    runs = [run(slots, sessions, args.calls, threads) for _ in range(args.repeat) for slots, sessions in settings]
    results = [max((r for r in runs if (r["slots"], r["sessions"]) == setting), key=lambda r: r["calls_per_s"])
               for setting in settings]
    lines = [f"Measured by `.venv/bin/python benchmarks/bench_batching.py` in one process (no HTTP, no client), "
             f"files spec, --ctx {CTX} per slot, temperature 0, {threads} threads, {args.calls} calls per session; "
             f"the fastest of {args.repeat} runs of each setting, taken in turn. Every setting, --slots 1 "
             "included, runs through the one decoder (engines/llama/batch.py).",
             "", "| --slots | sessions | calls | seconds | calls/s | p50 s | worst session / median | evaluated "
             "| generated | llama_decode ms per token fed |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        lines.append(f"| {r['slots']} | {r['sessions']} | {r['calls']} | {r['seconds']:.1f} | "
                     f"{r['calls_per_s']:.2f} | {r['p50']:.2f} | {r['worst']:.2f} | {r['evaluated']:.0f} | "
                     f"{r['generated']:.0f} | "
                     f"{profile(r['steps'])} |")
    by = {(r["slots"], r["sessions"]): r for r in results}
    lines.append("")
    for slots in sorted({r["slots"] for r in results}):
        one, many = by.get((slots, 1)), by.get((slots, max(r["sessions"] for r in results)))
        if one and many and many is not one:
            ratio = many["calls_per_s"] / one["calls_per_s"]
            lines.append(f"- --slots {slots}: {many['sessions']} sessions at {ratio:.2f}x one session's calls/s")
    lines.append(f"\nMachine load: {load_before} at the start, {machine_load()} at the end.")
    body = "\n".join(lines)
    print(body)
    write_section("batching-engine", "Continuous batching, in-process (engine only)", body)


if __name__ == "__main__":
    main()
