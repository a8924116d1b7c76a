"""Fidelity reports: a JSON summary, a Markdown table per mode, and a PNG chart."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp_sim.fidelity.evaluate import MODE_TITLES, StepResult
from mcp_sim.fidelity.judge import DIMENSIONS
from mcp_sim.fidelity.scoring import METRICS, aggregate

METRIC_TITLES = {"schema_valid": "schema", "error_agreement": "error", "structure": "structure",
                 "value": "value", "state": "state", "fidelity": "fidelity"}
JUDGE_METRICS = tuple(f"judge_{name}" for name in DIMENSIONS)


def summarize(results: Sequence[StepResult], meta: dict[str, Any]) -> dict[str, Any]:
    """Per mode: the overall scores (mean over all steps), those of each real server (both with bootstrap
    95 % intervals) and those of each tool."""
    metrics = METRICS + (JUDGE_METRICS if any(r.scores.judge is not None for r in results) else ())
    modes: dict[str, Any] = {}
    for mode in dict.fromkeys(r.mode for r in results):
        in_mode = [r for r in results if r.mode == mode]
        servers = {server: _with_latency(aggregate([r.scores for r in of_server], metrics, intervals=True),
                                         of_server)
                   for server in dict.fromkeys(r.server for r in in_mode)
                   for of_server in [[r for r in in_mode if r.server == server]]}
        tools = {tool: aggregate([r.scores for r in in_mode if r.tool == tool], metrics)
                 for tool in dict.fromkeys(r.tool for r in in_mode)}
        overall = _with_latency(aggregate([r.scores for r in in_mode], metrics, intervals=True), in_mode)
        modes[mode] = {"overall": overall, "servers": servers, "tools": tools}
    return {"meta": meta, "metrics": list(metrics), "modes": modes, "steps": [r.to_json() for r in results]}


def _with_latency(scores: dict[str, Any], results: Sequence[StepResult]) -> dict[str, Any]:
    """Adds the mean seconds the simulator took per call."""
    scores["seconds"] = round(sum(r.seconds for r in results) / len(results), 2) if results else None
    return scores


def markdown(summary: dict[str, Any]) -> str:
    metrics = summary["metrics"]
    titles = [METRIC_TITLES.get(m, m.removeprefix("judge_")) for m in metrics]
    lines = []
    for mode, block in summary["modes"].items():
        header = ["tool", "steps", *titles]
        lines += [f"### {MODE_TITLES.get(mode, mode)}", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        rows = [*block["tools"].items(), ("**overall**", block["overall"])]
        for tool, scores in rows:
            cells = [tool, str(scores["steps"]), *(_cell(scores.get(m)) for m in metrics)]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        if "servers" in block:
            header = ["server", "steps", *titles, "s/call"]
            lines += [f"Per server, {MODE_TITLES.get(mode, mode)}: mean [bootstrap 95 % interval]", "",
                      "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            for server, scores in [*block["servers"].items(), ("**overall**", block["overall"])]:
                bounds = scores.get("ci95") or {}
                cells = [server or "?", str(scores["steps"]),
                         *(_cell(scores.get(m), bounds.get(m)) for m in metrics), _cell(scores.get("seconds"))]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def _cell(value: float | None, interval: Sequence[float] | None = None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if not interval else f"{value:.1f} [{interval[0]:.1f}, {interval[1]:.1f}]"


def chart(summary: dict[str, Any], path: Path) -> None:
    """Top: each tool's fidelity by mode. Bottom: every overall score by mode."""
    import matplotlib

    matplotlib.use("Agg")  # no display; also keeps a GUI backend from starting in a server
    import matplotlib.pyplot as plt

    modes = list(summary["modes"])
    tools = list(dict.fromkeys(t for block in summary["modes"].values() for t in block["tools"]))
    metrics = summary["metrics"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8.0, 0.9 * len(tools) + 3), 8))
    width = 0.8 / max(1, len(modes))
    for offset, mode in enumerate(modes):
        block = summary["modes"][mode]
        per_tool = [block["tools"].get(t, {}).get("fidelity") or 0.0 for t in tools]
        label = MODE_TITLES.get(mode, mode)
        top.bar([i + offset * width for i in range(len(tools))], per_tool, width, label=label)
        overall = [block["overall"].get(m) or 0.0 for m in metrics]
        bottom.bar([i + offset * width for i in range(len(metrics))], overall, width, label=label)
    center = width * (len(modes) - 1) / 2
    top.set_xticks([i + center for i in range(len(tools))], tools, rotation=30, ha="right", fontsize=8)
    top.set_ylabel("fidelity (0-100)")
    top.set_title(f"Per-tool fidelity: {summary['meta'].get('model', '')}")
    bottom.set_xticks([i + center for i in range(len(metrics))],
                      [METRIC_TITLES.get(m, m.replace("judge_", "judge ")) for m in metrics], rotation=30,
                      ha="right", fontsize=8)
    bottom.set_ylabel("overall score (0-100)")
    for axis in (top, bottom):
        axis.set_ylim(0, 100)
        axis.legend(fontsize=8)
        axis.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(summary: dict[str, Any], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / "fidelity.json", directory / "fidelity.md", directory / "fidelity.png"]
    paths[0].write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    meta = summary["meta"]
    intro = [f"# Simulation fidelity: {meta.get('model', '')}", "",
             f"Traces: {', '.join(meta.get('traces', []))}; specs: {', '.join(meta.get('specs', []))}.", "",
             "Scores are 0-100 (mcp_sim/fidelity/scoring.py defines them); – means never applicable.", ""]
    text = "\n".join(intro) + "\n" + markdown(summary) + f"\n![chart]({paths[2].name})\n"
    paths[1].write_text(text, encoding="utf-8")
    chart(summary, paths[2])
    return paths
