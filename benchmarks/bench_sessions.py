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

from mcp_sim.base.grammar_schema import prepare_for_grammar  # noqa: E402
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.engines.llama.build import cpu_repack  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402

SPEC = REPO / "tool_specs" / "files.yaml"
SESSIONS = ("A", "B")
CTX = 8192
MAX_TOKENS = 96
# The HTTP servers' context per slot: room for the spec's ~660-token system prompt and a few calls.
HTTP_CTX = 4096


@dataclass
class Call:
    system: str
    session: str
    index: int  # 1-based position in its session
    latency_s: float
    ttft_s: float
    evaluated: int
    prompt_tokens: int
    generated: int = 0


@dataclass
class Run:
    calls: list[Call] = field(default_factory=list)

    def at(self, index: int) -> list[Call]:
        return [c for c in self.calls if c.index == index]


def arguments(session: str, index: int) -> dict[str, Any]:
    return {"path": f"/{session.lower()}/note-{index}.txt", "content": f"note {index} of session {session}"}


def run_mcp_sim(calls_per_session: int, threads: int, history_tokens: int = 0) -> tuple[Run, list[Any],
                                                                                       dict[str, float]]:
    """Interleaved sessions through the simulator; returns the calls, the prompts used, and timing splits."""
    catalog = load_catalog([SPEC])
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=threads)
    engine.load()
    model_time = _instrument_llama()
    simulator = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=MAX_TOKENS, attempts=1,
                                                      expose_prompt=True, history_tokens=history_tokens))
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
                                  - started, meta["evaluated_tokens"], meta["prompt_tokens"],
                                  meta["completion_tokens"]))
    split = {"wall_s": wall_total, "model_s": model_time["seconds"]}
    return run, prompts, split


def _instrument_llama() -> dict[str, float]:
    """Count the seconds spent inside llama.cpp itself: llama_decode (the decoder calls it by module
    attribute) and each sampled token (the sampler chain and its grammar)."""
    import llama_cpp

    from mcp_sim.engines.llama import sampling

    spent = {"seconds": 0.0}

    def timed(function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent["seconds"] += time.perf_counter() - started
        return wrapper

    llama_cpp.llama_decode = timed(llama_cpp.llama_decode)
    sampling.LazyGrammarSampler.sample = timed(sampling.LazyGrammarSampler.sample)  # type: ignore[method-assign]
    return spent


def bare_llama(threads: int) -> Any:
    """llama-cpp-python's Llama on the default model, with CPU weight repacking as mcp-sim chooses it: left on,
    llama.cpp segfaults on CPUs with AMX (build.repack_choice)."""
    import llama_cpp
    from llama_cpp import llama_cpp as bindings  # where Llama looks the function up

    defaults_of = bindings.llama_model_default_params
    use_extra_bufts = cpu_repack("auto").use_extra_bufts

    def model_params() -> Any:
        params = defaults_of()
        params.use_extra_bufts = use_extra_bufts
        return params

    bindings.llama_model_default_params = model_params
    try:
        return llama_cpp.Llama(str(default_model_path()), n_ctx=CTX, n_threads=threads, verbose=False, seed=0)
    finally:
        bindings.llama_model_default_params = defaults_of


def run_naive(prompts: list[Any], threads: int) -> Run:
    """The same prompts, interleaved the same way, each as a fresh create_chat_completion."""

    catalog = load_catalog([SPEC])
    schema = prepare_for_grammar(catalog.tools["write_file"].output_schema or {})
    llm = bare_llama(threads)
    run = Run()
    for session, index, messages in prompts:
        cached_before = list(llm._input_ids)
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


def run_raw_late_call(prompts: list[Any], sim: Run, threads: int, tries: int = 3) -> dict[str, float]:
    """Bare llama-cpp-python doing the last call's work: from a state holding all but the tokens mcp-sim
    evaluated, evaluate those and generate as many tokens as mcp-sim did, greedy, under the same grammar
    (llama.cpp's own grammar sampler). The best of `tries`; nothing else (no prompt building, no checks)."""
    import json

    import llama_cpp

    _, _, messages = prompts[-1]
    call = sim.calls[-1]
    schema = prepare_for_grammar(load_catalog([SPEC]).tools["write_file"].output_schema or {})
    llm = bare_llama(threads)
    tokens = _prompt_tokens(llm, messages)
    kept = len(tokens) - call.evaluated
    best = float("inf")
    for _ in range(tries):
        grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        llm.reset()
        llm.eval(tokens[:kept])  # the resumed state: not timed
        started = time.perf_counter()
        generated = llm.generate(tokens, temp=0.0, top_k=1, repeat_penalty=1.1, grammar=grammar)
        for produced, _token in enumerate(generated, start=1):
            if produced >= call.generated:
                break
        best = min(best, time.perf_counter() - started)
    mcp_sim = statistics.median(c.latency_s for c in sim.at(call.index))
    return {"raw_s": best, "mcp_sim_s": mcp_sim, "evaluated": call.evaluated, "generated": call.generated,
            "index": call.index}


def _prompt_tokens(llm: Any, messages: list[dict[str, str]]) -> list[int]:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos, bos = llm.token_eos(), llm.token_bos()
    formatter = Jinja2ChatFormatter(llm.metadata["tokenizer.chat_template"],
                                    llm._model.token_get_text(eos), llm._model.token_get_text(bos))
    prompt = formatter(messages=messages)
    return list(llm.tokenize(prompt.prompt.encode(), add_bos=not prompt.added_special, special=True))


def run_concurrency(levels: list[int], calls_each: int, slots: int) -> tuple[dict[int, dict[str, float]], float]:
    """Aggregate throughput over streamable HTTP with N concurrent sessions against a server decoding up to
    `slots` calls together; the server's peak RSS."""
    import anyio
    from mcp import Client

    sys.path.insert(0, str(REPO / "tests"))
    from tests.conftest import start_http_server, stop

    process, url = start_http_server(str(SPEC), "--temperature", "0", "--max-tokens", str(MAX_TOKENS),
                                     "--max-queue", "256", "--ctx", str(HTTP_CTX), "--slots", str(slots))
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
                    group.start_soon(session, f"s{slots}-c{count}-s{number}", latencies, per_session)
            elapsed = time.perf_counter() - started
            means = [statistics.mean(v) for v in per_session.values()]
            return {"slots": slots, "sessions": count, "calls": len(latencies), "seconds": elapsed,
                    "throughput": len(latencies) / elapsed, "p50": statistics.median(latencies),
                    "max_latency": max(latencies),
                    "worst_session_mean_over_median": max(means) / statistics.median(means)}

        async def all_levels() -> None:
            # Warm up: the first call of the server reads the system prompt; no level should pay for it.
            await session("warm-up", [], {})
            for count in levels:
                results[count] = await level(count)
                print(f"  --slots {slots}, {count:>2} sessions: {results[count]['throughput']:.2f} calls/s",
                      file=sys.stderr)

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
    parser.add_argument("--slots", default="1,16", help="servers to compare: calls decoded together (--slots)")
    parser.add_argument("--quick", action="store_true", help="skip the naive baseline and the HTTP part")
    parser.add_argument("--history-tokens", type=int, default=0,
                        help="mcp-sim's --history-tokens; with --quick, since the naive baseline replays mcp-sim's "
                             "own prompts")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args()
    threads = default_threads() or os.cpu_count() or 1
    command = " ".join(["benchmarks/bench_sessions.py", *sys.argv[1:]])

    print(f"mcp-sim: {args.calls} calls x {len(SESSIONS)} interleaved sessions...", file=sys.stderr)
    sim, prompts, split = run_mcp_sim(args.calls, threads, args.history_tokens)
    in_process_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    naive = Run()
    raw: dict[str, float] = {}
    if not args.quick:
        print("naive baseline...", file=sys.stderr)
        naive = run_naive(prompts, threads)
        print("bare llama.cpp, the late call...", file=sys.stderr)
        raw = run_raw_late_call(prompts, sim, threads)
    concurrency: dict[int, dict[int, dict[str, float]]] = {}
    server_rss: dict[int, float] = {}
    if not args.quick:
        print("concurrency over streamable HTTP...", file=sys.stderr)
        for slots in (int(n) for n in args.slots.split(",")):
            concurrency[slots], server_rss[slots] = run_concurrency(
                [int(n) for n in args.concurrency.split(",")], args.calls_per_session, slots)
    report = render(args.calls, sim, naive, split, concurrency, in_process_rss, server_rss, command, raw)
    print(report)
    if not args.quick:
        args.out.mkdir(exist_ok=True)
        plot(sim, naive, args.calls, args.out / "bench_session_latency.png")
        target = args.out / "BENCHMARKS.md"
        # The other benchmarks' sections (between <!-- bench:NAME --> markers) are kept.
        target.write_text(report.rstrip("\n") + "\n\n" + marked_sections(target) if target.exists() else report)


def marked_sections(path: Path) -> str:
    import re

    sections = re.findall(r"<!-- bench:(?:[\w-]+) -->.*?<!-- /bench:[\w-]+ -->", path.read_text(), re.DOTALL)
    return "\n\n".join(sections) + "\n"


def concurrency_section(concurrency: dict[int, dict[int, dict[str, float]]]) -> list[str]:
    lines = ["", "## Concurrent sessions over streamable HTTP", "",
             f"Each server: files spec, --ctx {HTTP_CTX} per slot, temperature 0; every session makes its calls one "
             "after another.", "",
             "| --slots | sessions | calls | seconds | calls/s | p50 latency s | max latency s "
             "| worst session / median |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for slots, levels in concurrency.items():
        for count, row in levels.items():
            lines.append(f"| {slots} | {count} | {row['calls']:.0f} | {row['seconds']:.1f} | {row['throughput']:.2f} | "
                         f"{row['p50']:.2f} | {row['max_latency']:.2f} | {row['worst_session_mean_over_median']:.2f} |")
    lines.append("")
    for slots, levels in concurrency.items():
        one, most = levels.get(1, {}).get("throughput"), max(levels)
        many = levels[most]["throughput"]
        if one:
            lines.append(f"- --slots {slots}: {most} sessions at {many / one:.2f}x one session's calls/s "
                         f"(target >= 1.5x); worst session mean {levels[most]['worst_session_mean_over_median']:.2f}x "
                         "the median (target <= 1.2x)")
    base, batched = concurrency.get(1, {}).get(1), concurrency.get(max(concurrency), {}).get(1)
    if base and batched and max(concurrency) > 1:
        lines.append(f"- one session alone: --slots {max(concurrency)} at {batched['p50'] / base['p50']:.2f}x the "
                     "p50 latency of --slots 1 (target <= 1.05x)")
    return lines


def kv_per_slot_mb() -> float:
    from mcp_sim.engines.llama.doctor import kv_cache_bytes
    from mcp_sim.engines.llama.gguf import read_metadata

    return (kv_cache_bytes(read_metadata(default_model_path()), HTTP_CTX) or 0) / 1024**2


def render(calls: int, sim: Run, naive: Run, split: dict[str, float],
           concurrency: dict[int, dict[int, dict[str, float]]], in_process_rss: float, server_rss: dict[int, float],
           command: str, raw: dict[str, float]) -> str:
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
    if raw:
        late = statistics.median(c.latency_s for c in naive.at(int(raw["index"]))) if naive.calls else float("nan")
        lines.append(f"- late call {raw['index']:.0f} ({raw['evaluated']:.0f} evaluated, {raw['generated']:.0f} "
                     f"generated tokens): mcp-sim {raw['mcp_sim_s']:.2f} s, bare llama-cpp-python doing the same work "
                     f"under the same grammar {raw['raw_s']:.2f} s = {raw['mcp_sim_s'] / raw['raw_s']:.2f}x "
                     f"(target <= 1.10x); naive {late:.2f} s, mcp-sim at {raw['mcp_sim_s'] / late:.2f}x of it "
                     "(target <= 0.55x)")
    if calls >= 3:
        early, late = (statistics.median(c.latency_s for c in sim.at(i)) for i in (2, calls))
        lines.append(f"- late / early: call {calls} {late:.2f} s / call 2 {early:.2f} s = {late / early:.2f}x "
                     "(target <= 1.35x)")
    overhead = (split["wall_s"] - split["model_s"]) / split["wall_s"] * 100
    lines.append(f"- mcp-sim overhead (everything but llama.cpp evaluation and sampling): {overhead:.1f}% of call "
                 f"time (target <= 5%)")
    if concurrency:
        lines += concurrency_section(concurrency)
    lines += ["", "## Memory", "",
              f"- peak RSS, in-process benchmark (model, KV, {len(SESSIONS)} session states): {in_process_rss:.0f} MB",
              *(f"- peak RSS, HTTP server with --slots {slots} --ctx {HTTP_CTX} through its concurrency runs: "
                f"{rss:.0f} MB" for slots, rss in server_rss.items()),
              f"- KV cache per slot at --ctx {HTTP_CTX}: {kv_per_slot_mb():.0f} MB (f16; the context of --slots N "
              "holds N of them, allocated at load)", ""]
    if naive.calls:
        lines.append("![latency against session length](bench_session_latency.png)")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
