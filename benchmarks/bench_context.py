"""A world that outgrows its context: what the calls after the first dropped turn cost (issue 14).

    .venv/bin/python benchmarks/bench_context.py               # ~6 min on 2 cores
    .venv/bin/python benchmarks/bench_context.py --calls 16 --modes baseline,shift

One world of `create_ticket` calls on tool_specs/crm.yaml with --ctx 5120 --max-tokens 256, at temperature
0, in one process, once per mode: `baseline` (the old behaviour: drop one turn at a time, re-read the
history), `chunks` (drop a quarter of the history's room at once, no shift: what recurrent models get) and
`shift` (chunks plus the KV-cache shift, the default for attention models). Writes its section of
docs/BENCHMARKS.md. Target: calls after the first drop cost at most 1.5x the calls before it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.report import machine_load, write_section  # noqa: E402
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402

SPEC = REPO / "tool_specs" / "crm.yaml"
CTX = 5120
MAX_TOKENS = 256
PRIORITIES = ("low", "normal", "high", "urgent")
# mode: (share of the history's room freed per drop, context shift)
MODES = {"baseline": (0.0, False), "chunks": (0.25, False), "shift": (0.25, True)}


@dataclass
class Call:
    index: int
    seconds: float
    evaluated: int
    dropped: int


def arguments(index: int) -> dict[str, Any]:
    return {"customer_id": f"C-100{index % 5 + 1}", "priority": PRIORITIES[index % 4],
            "subject": f"Order question number {index}: where is parcel {1000 + 37 * index}?"}


def run(mode: str, calls: int) -> list[Call]:
    fraction, shift = MODES[mode]
    engine = LlamaEngine(default_model_path(), n_ctx=CTX, n_threads=default_threads(), context_shift=shift)
    simulator = Simulator(load_catalog([SPEC]), engine, SimOptions(temperature=0.0, max_tokens=MAX_TOKENS))
    simulator.model.drop_fraction = fraction
    measured = []
    for index in range(1, calls + 1):
        started = time.perf_counter()
        result = simulator.simulate("create_ticket", arguments(index), world="bench")
        meta = result.meta[META_KEY]
        measured.append(Call(index, time.perf_counter() - started, meta.get("evaluated_tokens", 0),
                             meta.get("dropped_turns", 0)))
        print(f"{mode:8} call {index:2}: {measured[-1].seconds:5.2f} s, evaluated {measured[-1].evaluated:5}, "
              f"dropped {measured[-1].dropped}", flush=True)
    engine.close()
    return measured


def summary(calls: list[Call]) -> tuple[float, float, float, int | None]:
    """Mean seconds before the first drop (calls 2..), after it (from it on), their ratio, the first drop."""
    first = next((c.index for c in calls if c.dropped), None)
    before = [c.seconds for c in calls[1:] if first is None or c.index < first]
    after = [c.seconds for c in calls if first is not None and c.index >= first]
    mean_before = statistics.mean(before)
    mean_after = statistics.mean(after) if after else float("nan")
    return mean_before, mean_after, mean_after / mean_before, first


def report(runs: dict[str, list[Call]], load: str) -> str:
    modes = list(runs)
    lines = ["| call | " + " | ".join(f"{m} s | {m} evaluated | dropped" for m in modes) + " |",
             "| --- |" + " --- | --- | --- |" * len(modes)]
    for index in range(len(runs[modes[0]])):
        cells = [f"{runs[m][index].seconds:.2f} | {runs[m][index].evaluated} | {runs[m][index].dropped}"
                 for m in modes]
        lines.append(f"| {index + 1} | " + " | ".join(cells) + " |")
    lines.append("")
    for mode in modes:
        before, after, ratio, first = summary(runs[mode])
        lines.append(f"- {mode}: first drop at call {first}; mean {before:.2f} s before it (calls 2..), "
                     f"{after:.2f} s from it on: {ratio:.2f}x (target <= 1.5x)")
    lines.append(f"\nMeasured in one run, one mode after another; machine load: {load}.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--modes", default="baseline,chunks,shift")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/BENCHMARKS.md alone")
    args = parser.parse_args()
    load = machine_load()
    runs = {mode: run(mode, args.calls) for mode in args.modes.split(",")}
    text = report(runs, f"{load} at the start, {machine_load()} at the end")
    print(text)
    if not args.no_write:
        write_section("context", "A world past its context (crm.yaml, --ctx 5120, --max-tokens 256)", text)


if __name__ == "__main__":
    main()
