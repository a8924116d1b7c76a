"""Per-token cost of an answer: free against grammar-constrained decoding, eager against lazy grammar checks,
flash attention off and on, at a short and a long context (issue 14).

    .venv/bin/python benchmarks/bench_decode.py          # ~3 min on 2 cores

One LlamaEngine per flash-attention setting; each prompt's prefix is evaluated once, then every measured
call evaluates its last token and generates up to --tokens tokens at temperature 0 (so eager and lazy
checks must give the same answer, which is asserted). `eager` is llama-cpp-python's sampler with the
grammar filtering the whole vocabulary on every token (the old path); `lazy` checks only the sampled token.
Writes its section of docs/BENCHMARKS.md. Target: constrained within 15% of free per token.
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
from mcp_sim.core.model_answer import ModelAnswerer  # noqa: E402
from mcp_sim.core.prompt import render_action, system_prompt  # noqa: E402
from mcp_sim.core.simulator import SimOptions  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.core.worlds import Worlds  # noqa: E402
from mcp_sim.engines.base import ChatMessage, GenerationRequest  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402

SPEC = REPO / "tool_specs" / "crm.yaml"
CTX = 4608
# mode: (grammar, lazy checks)
MODES = {"free": (False, True), "eager grammar": (True, False), "lazy grammar": (True, True)}


def prompts() -> dict[str, list[ChatMessage]]:
    catalog = load_catalog([SPEC])
    action = render_action("create_ticket", {"customer_id": "C-1002", "priority": "high",
                                             "subject": "Stove fuel canister leaks at the valve"})
    long_system = system_prompt(catalog.spec_sets[0], "generic", errors=False, scenario="default")
    short_system = "You simulate the tool create_ticket of a helpdesk. Answer with the ticket as JSON."
    return {"short": [ChatMessage("system", short_system), ChatMessage("user", action)],
            "long": [ChatMessage("system", long_system), ChatMessage("user", action)]}


def schema() -> dict[str, Any]:
    catalog = load_catalog([SPEC])
    answerer = ModelAnswerer(None, SimOptions(simulate_errors=False), Worlds())  # type: ignore[arg-type]
    return answerer.grammar_schema(catalog.tools["create_ticket"])[0]


def measure(engine: LlamaEngine, messages: list[ChatMessage], mode: str, tokens: int, repeats: int,
            json_schema: dict[str, Any]) -> tuple[float, str, int]:
    grammar, lazy = MODES[mode]
    engine.lazy_grammar = lazy
    samples, text, produced = [], "", 0
    for _ in range(repeats + 1):  # the first call evaluates the prompt's prefix; not counted
        request = GenerationRequest(messages=messages, max_tokens=tokens, temperature=0.0,
                                    json_schema=json_schema if grammar else None, schema_key="bench",
                                    cache_key="bench")
        started = time.perf_counter()
        generation = engine.generate(request)
        samples.append((time.perf_counter() - started) / max(1, generation.completion_tokens))
        text, produced = generation.text, generation.completion_tokens
    return statistics.median(samples[1:]) * 1000, text, produced


def run(flash: bool, tokens: int, repeats: int) -> dict[tuple[str, str], tuple[float, int, int]]:
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=default_threads(), flash_attn=flash)
    json_schema = schema()
    results: dict[tuple[str, str], tuple[float, int, int]] = {}
    for context, messages in prompts().items():
        answers = {}
        for mode in MODES:
            ms, text, produced = measure(engine, messages, mode, tokens, repeats, json_schema)
            results[(context, mode)] = (ms, engine.count_tokens(messages), produced)
            answers[mode] = text
            print(f"flash {flash!s:5} {context:5} {mode:13}: {ms:6.2f} ms/token over {produced} tokens", flush=True)
        assert answers["eager grammar"] == answers["lazy grammar"], answers
    engine.close()
    return results


def report(runs: dict[bool, dict[tuple[str, str], tuple[float, int, int]]], load: str) -> str:
    lines = ["| flash attention | context tokens | free ms/token | eager grammar ms/token | lazy grammar ms/token "
             "| eager / free | lazy / free |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for flash, results in runs.items():
        for context in ("short", "long"):
            free, eager, lazy = (results[(context, mode)][0] for mode in MODES)
            lines.append(f"| {'on' if flash else 'off'} | {results[(context, 'free')][1]} | {free:.2f} | {eager:.2f} "
                         f"| {lazy:.2f} | {eager / free:.2f}x | {lazy / free:.2f}x |")
    lines.append(f"\nTemperature 0; eager and lazy answers identical (asserted). Measured in one run; machine "
                 f"load: {load}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=70)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args()
    load = machine_load()
    runs = {flash: run(flash, args.tokens, args.repeats) for flash in (False, True)}
    text = report(runs, f"{load} at the start, {machine_load()} at the end")
    print(text)
    if not args.no_write:
        write_section("decode", "Per-token cost: grammar checks and flash attention (crm.yaml create_ticket)", text)


if __name__ == "__main__":
    main()
