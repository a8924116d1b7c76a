"""What worlds cost: the first call of a fork, and switching between worlds, against staying in one.

    .venv/bin/python benchmarks/bench_worlds.py            # ~1 min on 2 cores, default model, files spec

Prints evaluated tokens and latency per call for: one world alone; two worlds taking turns (every call is a
switch: the other world's state is parked and this one's restored); a fork's first call after another
world took the model (it resumes from the origin's parked state) against a fresh world's first call with
the same history replayed from nothing. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator  # noqa: E402
from mcp_sim.core.specs import load_catalog  # noqa: E402
from mcp_sim.engines.llama import LlamaEngine, default_threads  # noqa: E402
from mcp_sim.models.bundled import default_model_path  # noqa: E402

SPEC = REPO / "tool_specs" / "files.yaml"
OPTIONS = SimOptions(temperature=0.0, max_tokens=96, attempts=1)


def call(sim: Simulator, world: str, step: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = sim.simulate("write_file", {"path": f"/{world}/{step}.txt", "content": f"step {step}"}, world=world)
    meta = result.meta[META_KEY]
    return {"s": time.perf_counter() - started, "evaluated": meta.get("evaluated_tokens", 0),
            "prompt": meta.get("prompt_tokens", 0)}


def summary(label: str, rows: list[dict[str, Any]]) -> None:
    print(f"{label:<44} {statistics.median(r['s'] for r in rows):6.2f} s  "
          f"{statistics.median(r['evaluated'] for r in rows):6.0f} evaluated of "
          f"{statistics.median(r['prompt'] for r in rows):5.0f}  (median of {len(rows)})")


def main() -> None:
    engine = LlamaEngine(default_model_path(), n_ctx=8192, n_threads=default_threads())
    engine.load()
    sim = Simulator(load_catalog([SPEC]), engine, OPTIONS)
    call(sim, "warmup", 0)  # the system prompt is evaluated once and snapshotted
    alone = [call(sim, "alone", step) for step in range(1, 9)]
    switching = [call(sim, world, step) for step in range(1, 5) for world in ("left", "right")]
    sim.worlds.fork("alone", "alone-fork")
    call(sim, "bystander", 1)  # takes the model: the origin's state is parked
    fork_first = call(sim, "alone-fork", 9)
    fresh = Simulator(load_catalog([SPEC]), engine, OPTIONS)  # same engine, no saved state for this world
    replayed = fresh.worlds.get("replayed")
    for source, turns in sim.worlds.existing("alone").turns.items():  # the same history, with no state
        for turn in turns:
            fresh.worlds.record(replayed, source, turn)
    call(sim, "bystander", 2)
    replayed_first = call(fresh, "replayed", 9)  # ...its first call must read that history
    print(f"files spec, {OPTIONS.max_tokens} max tokens, temperature 0, {default_threads()} threads")
    summary("one world alone, calls 2-9", alone[1:])
    summary("two worlds taking turns (every call a switch)", switching[2:])
    summary("a fork's first call (origin state reused)", [fork_first])
    summary("a world with the same history, no saved state", [replayed_first])


if __name__ == "__main__":
    main()
