"""Session-length, overhead, concurrency and memory benchmark: mcp-sim against a naive simulator.

    .venv/bin/python benchmarks/bench_sessions.py                 # the full run (~10 min on 2 cores)
    .venv/bin/python benchmarks/bench_sessions.py --calls 10 --quick

The naive baseline is what a user writes in twenty lines: one Llama, and for every call a fresh
`create_chat_completion` over the full prompt (system + history + call) with the output schema as
`response_format`. Both serve two interleaved sessions of the files spec with the default model, at
temperature 0 so their answers have the same length. Prints a table and writes docs/BENCHMARKS.md and
docs/bench_session_latency.png. Run it on an otherwise idle machine: llama.cpp's threads share the cores.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.grammar_schema import prepare_for_grammar  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402
from mcp_sim.simulator import META_KEY, SimOptions, Simulator  # noqa: E402
from mcp_sim.specs import load_catalog  # noqa: E402

SPEC = REPO / "tool_specs" / "files.yaml"
SESSIONS = ("A", "B")
CTX = 8192
MAX_TOKENS = 96


@dataclass
class Call:
    system: str
    session: str
    index: int  # 1-based position in its session
    latency_s: float
    ttft_s: float
    evaluated: int
    prompt_tokens: int


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)

    def at(self, index: int) -> list[Call]:
        return [c for c in self.calls if c.index == index]


def arguments(session: str, index: int) -> dict[str, Any]:
    return {"path": f"/{session.lower()}/note-{index}.txt", "content": f"note {index} of session {session}"}


def run_mcp_sim(calls_per_session: int, threads: int) -> tuple[Run, list[Any], dict[str, float]]:
    """Interleaved sessions through the simulator; returns the calls, the prompts used, and timing splits."""
    catalog = load_catalog([SPEC])
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=threads)
    engine.load()
    model_time = _instrument_llama(engine._llama)  # noqa: SLF001
    simulator = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=MAX_TOKENS, attempts=1,
                                                      expose_prompt=True))
    run, prompts = Run(), []
    wall_total = 0.0
    for index in range(1, calls_per_session + 1):
        for session in SESSIONS:
            first_token: list[float] = []
            started = time.perf_counter()
            result = simulator.simulate("write_file", arguments(session, index), world=session,
                                        on_progress=lambda n, _t, seen=first_token: seen.append(time.perf_counter()))
            elapsed = time.perf_counter() - started
            wall_total += elapsed
            meta = result.meta[META_KEY]
            prompts.append((session, index, meta["prompt"]))
            run.calls.append(Call("mcp-sim", session, index, elapsed, (first_token or [time.perf_counter()])[0]
                                  - started, meta["evaluated_tokens"], meta["prompt_tokens"]))
    split = {"wall_s": wall_total, "model_s": model_time["seconds"]}
    return run, prompts, split


def _instrument_llama(llama: Any) -> dict[str, float]:
    """Count the seconds spent inside llama.cpp itself (evaluation and sampling): bare llama-cpp-python."""
    spent = {"seconds": 0.0}
    original_eval, original_sample = llama.eval, llama.sample

    def timed(function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent["seconds"] += time.perf_counter() - started
        return wrapper

    llama.eval, llama.sample = timed(original_eval), timed(original_sample)
    return spent


def run_naive(prompts: list[Any], threads: int) -> Run:
    """The same prompts, interleaved the same way, each as a fresh create_chat_completion."""
    import llama_cpp

    catalog = load_catalog([SPEC])
    schema = prepare_for_grammar(catalog.tools["write_file"].output_schema or {})
    llm = llama_cpp.Llama(str(default_model_path()), n_ctx=CTX, n_threads=threads, verbose=False, seed=0)
    run = Run()
    for session, index, messages in prompts:
        cached_before = list(llm._input_ids)  # noqa: SLF001
        started = time.perf_counter()
        stream = llm.create_chat_completion(messages=messages, max_tokens=MAX_TOKENS, temperature=0.0,
                                            response_format={"type": "json_object", "schema": schema},
                                            stream=True)
        ttft = None
        for chunk in stream:
            if ttft is None and chunk["choices"][0]["delta"].get("content"):
                ttft = time.perf_counter() - started
        elapsed = time.perf_counter() - started
        prompt_tokens = _prompt_tokens(llm, messages)
        shared = 0
        for a, b in zip(cached_before, prompt_tokens, strict=False):
            if a != b:
                break
            shared += 1
        run.calls.append(Call("naive", session, index, elapsed, ttft or elapsed, len(prompt_tokens) - shared,
                              len(prompt_tokens)))
    return run


def _prompt_tokens(llm: Any, messages: list[dict[str, str]]) -> list[int]:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos, bos = llm.token_eos(), llm.token_bos()
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"],
                                    llm._model.token_get_text(eos), llm._model.token_get_text(bos))  # noqa: SLF001
    prompt = formatter(messages=messages)
    return list(llm.tokenize(prompt.prompt.encode(), add_bos=not prompt.added_special, special=True))


def run_concurrency(levels: list[int], calls_each: int) -> tuple[dict[int, dict[str, float]], float]:
    """Aggregate throughput over streamable HTTP with N concurrent sessions; the server's peak RSS."""
    import anyio
    from mcp import Client

    sys.path.insert(0, str(REPO / "tests"))
    from tests.conftest import start_http_server, stop

    process, url = start_http_server(str(SPEC), "--temperature", "0", "--max-tokens", str(MAX_TOKENS),
                                     "--max-queue", "256")
    results: dict[int, dict[str, float]] = {}
    try:
        async def session(tag: str, latencies: list[float], per_session: dict[str, list[float]]) -> None:
            async with Client(url, mode="legacy", read_timeout_seconds=900) as client:
                for index in range(calls_each):
                    started = time.perf_counter()
                    result = await client.call_tool("write_file", arguments(tag, index))
                    assert not result.is_error, result.content
                    latencies.append(time.perf_counter() - started)
                    per_session.setdefault(tag, []).append(latencies[-1])

        async def level(count: int) -> dict[str, float]:
            latencies: list[float] = []
            per_session: dict[str, list[float]] = {}
            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for number in range(count):
                    group.start_soon(session, f"c{count}-s{number}", latencies, per_session)
            elapsed = time.perf_counter() - started
            means = [statistics.mean(v) for v in per_session.values()]
            return {"sessions": count, "calls": len(latencies), "seconds": elapsed,
                    "throughput": len(latencies) / elapsed, "p50": statistics.median(latencies),
                    "max_latency": max(latencies),
                    "worst_session_mean_over_median": max(means) / statistics.median(means)}

        async def all_levels() -> None:
            # Warm up: the first call of the server reads the system prompt; no level should pay for it.
            await session("warm-up", [], {})
            for count in levels:
                results[count] = await level(count)
                print(f"  {count:>2} sessions: {results[count]['throughput']:.2f} calls/s", file=sys.stderr)

        anyio.run(all_levels)
        peak_rss_mb = _peak_rss_mb(process.pid)
    finally:
        stop(process)
    return results, peak_rss_mb


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def plot(sim: Run, naive: Run, calls: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = list(range(1, calls + 1))
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for run, label in ((naive, "naive create_chat_completion"), (sim, "mcp-sim")):
        left.plot(xs, [statistics.median(c.latency_s for c in run.at(i)) for i in xs], marker="o", label=label)
        right.plot(xs, [statistics.median(c.evaluated for c in run.at(i)) for i in xs], marker="o", label=label)
    left.set(xlabel="call number in its session", ylabel="latency (s)",
             title="Latency per call, 2 interleaved sessions")
    right.set(xlabel="call number in its session", ylabel="prompt tokens evaluated", title="Tokens evaluated per call")
    for axis in (left, right):
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30, help="calls per session (session length)")
    parser.add_argument("--concurrency", default="1,4,16", help="concurrent HTTP sessions to measure")
    parser.add_argument("--calls-per-session", type=int, default=4, help="calls per session in the HTTP part")
    parser.add_argument("--quick", action="store_true", help="skip the naive baseline and the HTTP part")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args()
    threads = default_threads() or os.cpu_count() or 1
    command = " ".join(["benchmarks/bench_sessions.py", *sys.argv[1:]])

    print(f"mcp-sim: {args.calls} calls x {len(SESSIONS)} interleaved sessions...", file=sys.stderr)
    sim, prompts, split = run_mcp_sim(args.calls, threads)
    in_process_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    naive = Run()
    if not args.quick:
        print("naive baseline...", file=sys.stderr)
        naive = run_naive(prompts, threads)
    concurrency: dict[int, dict[str, float]] = {}
    server_rss = float("nan")
    if not args.quick:
        print("concurrency over streamable HTTP...", file=sys.stderr)
        concurrency, server_rss = run_concurrency([int(n) for n in args.concurrency.split(",")],
                                                  args.calls_per_session)
    report = render(args.calls, sim, naive, split, concurrency, in_process_rss, server_rss, command)
    print(report)
    if not args.quick:
        args.out.mkdir(exist_ok=True)
        plot(sim, naive, args.calls, args.out / "bench_session_latency.png")
        target = args.out / "BENCHMARKS.md"
        # The other benchmarks' sections (between <!-- bench:NAME --> markers) are kept.
        target.write_text(report.rstrip("\n") + "\n\n" + marked_sections(target) if target.exists() else report)


def marked_sections(path: Path) -> str:
    import re

    return "\n\n".join(re.findall(r"<!-- bench:(?:\w+) -->.*?<!-- /bench:\w+ -->", path.read_text(), re.DOTALL)) + "\n"


def render(calls: int, sim: Run, naive: Run, split: dict[str, float], concurrency: dict[int, dict[str, float]],
           in_process_rss: float, server_rss: float, command: str) -> str:
    lines = ["# Benchmarks", "", f"Measured by `.venv/bin/python {command}` on "
             f"{os.cpu_count()} CPU cores, default model (SmolLM2-135M-Instruct Q4_1), files spec, "
             f"{len(SESSIONS)} interleaved sessions, temperature 0, max_tokens {MAX_TOKENS}.", "",
             "## Latency and tokens evaluated against session length", "",
             "| call | mcp-sim p50 s | p95 s | TTFT s | evaluated | naive p50 s | p95 s | TTFT s | evaluated |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for index in range(1, calls + 1):
        row = [str(index)]
        for run in (sim, naive):
            chosen = run.at(index)
            if not chosen:
                row += ["-"] * 4
                continue
            latencies = [c.latency_s for c in chosen]
            row += [f"{statistics.median(latencies):.2f}", f"{percentile(latencies, 0.95):.2f}",
                    f"{statistics.median(c.ttft_s for c in chosen):.2f}",
                    f"{statistics.median(c.evaluated for c in chosen):.0f}"]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Targets", ""]
    for index, target in ((10, 5), (30, 10)):
        if index <= calls and naive.calls:
            ratio = statistics.median(c.ttft_s for c in naive.at(index)) / statistics.median(
                c.ttft_s for c in sim.at(index))
            lines.append(f"- TTFT of call {index}: naive / mcp-sim = {ratio:.1f}x (target >= {target}x)")
    evaluated = [statistics.median(c.evaluated for c in sim.at(i)) for i in range(2, calls + 1)]
    if evaluated:
        spread = (max(evaluated) - min(evaluated)) / min(evaluated) * 100
        lines.append(f"- tokens evaluated per call, calls 2..{calls}: {min(evaluated):.0f} to {max(evaluated):.0f} "
                     f"({spread:.0f}% spread; target within 20%)")
    overhead = (split["wall_s"] - split["model_s"]) / split["wall_s"] * 100
    lines.append(f"- mcp-sim overhead (everything but llama.cpp evaluation and sampling): {overhead:.1f}% of call "
                 f"time (target <= 5%)")
    if concurrency:
        lines += ["", "## Concurrent sessions over streamable HTTP", "",
                  "| sessions | calls | seconds | calls/s | p50 latency s | max latency s | worst session / median |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for count, row in concurrency.items():
            lines.append(f"| {count} | {row['calls']:.0f} | {row['seconds']:.1f} | {row['throughput']:.2f} | "
                         f"{row['p50']:.2f} | {row['max_latency']:.2f} | {row['worst_session_mean_over_median']:.2f} |")
        one = concurrency.get(1, {}).get("throughput")
        many = concurrency.get(max(concurrency), {}).get("throughput")
        if one and many:
            lines.append(f"\nThroughput with {max(concurrency)} sessions is {many / one * 100:.0f}% of one session's "
                         "(target: within 10%).")
    lines += ["", "## Memory", "",
              f"- peak RSS, in-process benchmark (model, KV, {len(SESSIONS)} session states): {in_process_rss:.0f} MB",
              f"- peak RSS, HTTP server through the concurrency runs: {server_rss:.0f} MB "
              "(bounded by --state-cache-mb, default 1024 per instance)",
              "- replay-cache hit latency: not measured; mcp-sim has no replay cache yet", ""]
    if naive.calls:
        lines.append("![latency against session length](bench_session_latency.png)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
