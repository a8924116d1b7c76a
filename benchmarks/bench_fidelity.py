"""Score the simulator against the fidelity benchmark (tool_specs/fidelity/): every server, both modes.

Each server runs as its own `mcp-sim eval` under the shared model lock, so a long measurement
lets other model runs in between, and its report is kept: an interrupted run resumes where it stopped
(`--fresh` starts over). The parts are then merged into one report with bootstrap 95 % intervals per
server and per score (fidelity.md, fidelity.json, fidelity.png).

    .venv/bin/python benchmarks/bench_fidelity.py --out docs/fidelity/after      # all, both modes
    .venv/bin/python benchmarks/bench_fidelity.py --server sqlite --mode closed   # a part
    .venv/bin/python benchmarks/bench_fidelity.py --out DIR -- --model other.gguf  # eval options after --

Scoring needs only the committed traces and specs, not the real servers.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp_sim.fidelity.evaluate import MODES, StepResult  # noqa: E402
from mcp_sim.fidelity.report import markdown, summarize, write_report  # noqa: E402

BENCHMARK = REPO / "tool_specs" / "fidelity"
# The lock every model run on a shared machine takes (one llama.cpp at a time: threads spin otherwise).
LOCK = Path(os.environ.get("MCP_SIM_MODEL_LOCK", "/tmp/mcp-sim-model.lock"))
# One thread: on a busy shared machine llama.cpp's threads spin at barriers; the answers are the same.
DEFAULT_EVAL_OPTIONS = ["--threads", "1"]
# Servers whose answers are pure computation: a world model does not compute (docs/FIDELITY.md), so their
# scores are reported apart and left out of the overall.
COMPUTATION = {"calculator"}


def servers() -> list[str]:
    """The benchmark's servers, fewest recorded calls first (a partial run then covers more servers)."""
    return sorted((p.stem for p in BENCHMARK.glob("*.yaml")),
                  key=lambda name: (len((BENCHMARK / f"{name}.jsonl").read_text().splitlines()), name))


def run_part(server: str, modes: tuple[str, ...], parts: Path, options: list[str]) -> list[Path]:
    """One `mcp-sim eval` of one server in `modes`, under the model lock; the fidelity.json files that
    hold those modes (an earlier run's parts, one per mode, count too)."""
    both = parts / f"{server}.both" / "fidelity.json"
    if len(modes) > 1 and both.exists():
        print(f"{server}: kept from an earlier run ({both})", file=sys.stderr)
        return [both]
    kept = [parts / f"{server}.{mode}" / "fidelity.json" for mode in modes]
    kept = [path for path in kept if path.exists()]
    missing = [mode for mode in modes if parts / f"{server}.{mode}" / "fidelity.json" not in kept]
    if kept:
        print(f"{server}: kept from an earlier run ({', '.join(str(p) for p in kept)})", file=sys.stderr)
    if not missing:
        return kept
    mode = "both" if len(missing) > 1 else missing[0]
    report = parts / f"{server}.{mode}"
    done = report / "fidelity.json"
    command = [sys.executable, "-m", "mcp_sim", "eval", str(BENCHMARK / f"{server}.jsonl"),
               "--spec", str(BENCHMARK / f"{server}.yaml"), "--mode", mode, "--report", str(report), *options]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with Path(LOCK).open("a") as lock:
        print(f"{server} {mode}: waiting for the model lock {LOCK}", file=sys.stderr, flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = time.monotonic()
        completed = subprocess.run(command, env=env, stdout=subprocess.DEVNULL)
    if completed.returncode != 0:
        sys.exit(f"{server} {mode}: mcp-sim eval failed (exit {completed.returncode})")
    print(f"{server} {mode}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    for extra in (report / "fidelity.md", report / "fidelity.png"):  # the merged report has them
        extra.unlink(missing_ok=True)
    return [*kept, done]


def merge(paths: list[Path], out: Path) -> dict[str, Any]:
    steps: list[StepResult] = []
    model = None
    for path in paths:
        part = json.loads(path.read_text(encoding="utf-8"))
        model = model or part["meta"].get("model")
        steps.extend(StepResult.from_json(step) for step in part["steps"])
    servers = dict.fromkeys(p.parent.name.split(".")[0] for p in paths)
    meta = {"model": model, "traces": [f"tool_specs/fidelity/{name}.jsonl" for name in servers],
            "specs": ["tool_specs/fidelity/"], "modes": list(dict.fromkeys(s.mode for s in steps)), "parts": len(paths)}
    summary = summarize(steps, meta)
    write_report(summary, out)
    return summary


HEADLINE = ("fidelity", "value", "state")


def headline(summary: dict[str, Any]) -> str:
    """One row per server: fidelity, value and state, closed loop / teacher-forced, with their intervals."""
    modes = summary["modes"]
    names = list(dict.fromkeys(name for block in modes.values() for name in block["servers"]))
    header = ["server", "calls", *(f"{metric} (closed / forced)" for metric in HEADLINE), "s/call"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in [*names, None]:
        rows = {mode: (block["overall"] if name is None else block["servers"].get(name, {}))
                for mode, block in modes.items()}
        steps = next((r["steps"] for r in rows.values() if r), 0)
        cells = ["**overall**" if name is None else name, str(steps)]
        for metric in HEADLINE:
            cells.append(" / ".join(_with_interval(rows[mode], metric) for mode in MODES if mode in rows))
        cells.append(" / ".join(f"{rows[mode]['seconds']:.1f}" if rows[mode].get("seconds") else "–"
                                for mode in MODES if mode in rows))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _with_interval(scores: dict[str, Any], metric: str) -> str:
    value = scores.get(metric)
    if value is None:
        return "–"
    low, high = (scores.get("ci95") or {}).get(metric) or (value, value)
    return f"{value:.1f} [{low:.0f}-{high:.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", action="append", choices=servers(), help="Only this server (repeatable).")
    parser.add_argument("--mode", choices=[*MODES, "both"], default="both")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "fidelity" / "after",
                        help="Report directory; its parts/ keeps each server's run (fidelity.json, every step).")
    parser.add_argument("--fresh", action="store_true", help="Drop the parts of an earlier run first.")
    parser.add_argument("eval_options", nargs="*", help="Options for `mcp-sim eval`, after --.")
    args = parser.parse_args()
    parts = args.out / "parts"
    if args.fresh and parts.exists():
        for old in parts.glob("*/*"):
            old.unlink()
    parts.mkdir(parents=True, exist_ok=True)
    modes = MODES if args.mode == "both" else (args.mode,)
    options = args.eval_options or DEFAULT_EVAL_OPTIONS
    # One part per server, both modes in it: each a few minutes under the lock.
    done = [path for server in args.server or servers() for path in run_part(server, modes, parts, options)]
    computed = [path for path in done if path.parent.name.split(".")[0] in COMPUTATION]
    summary = merge([path for path in done if path not in computed], args.out)
    print(markdown(summary))
    text = headline(summary)
    if computed:
        apart = merge(computed, args.out / "computation")
        text += f"\n\nPure computation, apart ({', '.join(sorted(COMPUTATION))}):\n\n{headline(apart)}"
    print(text)
    (args.out / "headline.md").write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out}/fidelity.md, fidelity.json, fidelity.png", file=sys.stderr)


if __name__ == "__main__":
    main()
