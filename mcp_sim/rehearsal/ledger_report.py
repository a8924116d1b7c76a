"""The ledger as one self-contained HTML page: summary, a chart and a timeline of calls per world.

Nothing on the page loads from elsewhere (inline CSS, an inline SVG chart), so it opens offline and can be
mailed around. Everything from the ledger is escaped: arguments and results come from an agent.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from html import escape
from typing import Any

from mcp_sim.rehearsal.ledger import LedgerEntry, summarize

OK_COLOUR, ERROR_COLOUR = "#2e7d32", "#d62728"
_COLUMNS = ("time", "tool", "arguments", "outcome", "faults", "latency")

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1b1b1b; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 17px; margin: 24px 0 6px; }
.summary { font-size: 15px; max-width: 70em; }
.chart svg { max-width: 100%; height: auto; }
table.timeline { border-collapse: collapse; width: 100%; table-layout: fixed; }
col.time { width: 13%; } col.tool { width: 18%; } col.arguments { width: 26%; } col.outcome { width: 25%; }
col.faults { width: 10%; } col.latency { width: 8%; }
.timeline th, .timeline td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
.timeline th { background: #f3f3f3; }
.timeline pre { margin: 0; white-space: pre-wrap; word-break: break-word; max-width: 32em; font-size: 12px; }
.call.error td.outcome { color: #b71c1c; font-weight: 600; }
.call.ok td.outcome { color: #2e7d32; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 4px; font-size: 11px; font-weight: 700; }
.badge.destructive { background: #b00020; color: #fff; }
.badge.write { background: #e3eaf5; color: #1a3d7c; }
.fault { display: inline-block; background: #fff3cd; border: 1px solid #e0c060; border-radius: 3px;
         padding: 0 4px; margin: 1px; font-size: 12px; }
"""


def render_html(entries: Sequence[LedgerEntry]) -> str:
    """The whole page as a string."""
    worlds = list(dict.fromkeys(e.world for e in entries))
    sections = "\n".join(_world_section(w, [e for e in entries if e.world == w]) for w in worlds)
    chart = f'<div class="chart">{_chart_svg(entries, worlds)}</div>' if entries else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>mcp-sim ledger</title><style>{_CSS}</style></head><body>\n"
            f'<h1>What the agent would have changed</h1>\n<p class="summary">{escape(summarize(entries))}</p>\n'
            f"{chart}\n{sections}\n</body></html>\n")


def _world_section(world: str, entries: list[LedgerEntry]) -> str:
    columns = "".join(f'<col class="{c}">' for c in _COLUMNS)
    header = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    rows = "\n".join(_row(e) for e in entries)
    calls = f"{len(entries)} call{'' if len(entries) == 1 else 's'}"
    return (f'<section class="world" data-world="{escape(world)}"><h2>World: {escape(world)} ({calls})</h2>\n'
            f'<table class="timeline">{columns}<thead><tr>{header}</tr></thead><tbody>\n{rows}\n</tbody></table>'
            "</section>")


def _row(entry: LedgerEntry) -> str:
    outcome = "error" if entry.is_error else "ok"
    badge = ('<span class="badge destructive">destructive</span>' if entry.destructive
             else '<span class="badge write">write</span>')
    result = entry.result if entry.structured is None else json.dumps(entry.structured, indent=1)
    faults = "".join(f'<span class="fault">{escape(f)}</span>' for f in entry.faults) or "–"
    latency = "–" if entry.latency_ms is None else f"{entry.latency_ms:,.0f} ms"
    cells = [escape(entry.time.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"),
             f"<code>{escape(entry.tool)}</code> {badge}",
             f"<pre>{escape(json.dumps(entry.arguments, indent=1, ensure_ascii=False))}</pre>",
             f"{outcome}<pre>{escape(result)}</pre>{_state_change(entry)}", faults, latency]
    tds = "".join(f'<td class="{name}">{cell}</td>' for name, cell in zip(_COLUMNS, cells, strict=True))
    return f'<tr class="call {outcome}" data-tool="{escape(entry.tool)}">{tds}</tr>'


def _state_change(entry: LedgerEntry) -> str:
    """What the call changed in the world's live data, before and after."""
    if not entry.state:
        return ""
    change = entry.state
    title = f"{change.get('op')} {change.get('collection')} {change.get('key')}"
    sides = "".join(f'<div class="{side}"><b>{side}</b><pre>{escape(json.dumps(change.get(side), indent=1))}'
                    "</pre></div>" for side in ("before", "after"))
    return f'<details class="state"><summary>state: {escape(title)}</summary>{sides}</details>'


def _chart_svg(entries: Sequence[LedgerEntry], worlds: list[str]) -> str:
    """Calls over time, one row per world; green ok, red failed; triangles are destructive calls. Calls too
    close together to tell apart are stacked a little above and below their world's row."""
    import matplotlib

    matplotlib.use("Agg")  # no display; also keeps a GUI backend from starting in a server
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(11, 0.6 * len(worlds) + 1.6))
    times = [mdates.date2num(e.time) for e in entries]
    rows = _dodged_rows(entries, times, worlds)
    for is_error, colour, label in ((False, OK_COLOUR, "ok"), (True, ERROR_COLOUR, "failed")):
        for destructive, marker in ((False, "o"), (True, "^")):
            picked = [i for i, e in enumerate(entries) if e.is_error == is_error and e.destructive == destructive]
            if picked:
                axis.scatter([times[i] for i in picked], [rows[i] for i in picked], c=colour, marker=marker, s=60,
                             label=f"{label}{', destructive' if destructive else ''}")
    axis.set_yticks(range(len(worlds)), worlds)
    axis.set_ylim(len(worlds) - 0.3, -0.7)  # first world on top, as in the timeline below
    _time_axis(axis, min(times), max(times))
    axis.set_xlabel("time (UTC)")
    axis.grid(axis="x", alpha=0.3)
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    buffer = io.StringIO()
    # No metadata: it would name matplotlib's web site; the page links nowhere.
    fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    plt.close(fig)
    return _inline(buffer.getvalue())


# Marks closer than this share of the time span overlap at the chart's width; offsets tried, in rows.
_MARK_GAP = 0.015
_OFFSETS = (0.0, -0.2, 0.2, -0.1, 0.1, -0.3, 0.3)
_DAY_S = 86400.0


def _dodged_rows(entries: Sequence[LedgerEntry], times: list[float], worlds: list[str]) -> list[float]:
    """Each call's row: its world's, moved off any earlier mark it would cover (calls < 1 s apart)."""
    gap = max(max(times) - min(times), 60 / _DAY_S) * _MARK_GAP
    placed: dict[tuple[str, float], list[float]] = {}
    rows = []
    for entry, time in zip(entries, times, strict=True):
        offset = next((o for o in _OFFSETS if all(abs(time - t) >= gap for t in placed.get((entry.world, o), []))),
                      _OFFSETS[-1])
        placed.setdefault((entry.world, offset), []).append(time)
        rows.append(worlds.index(entry.world) + offset)
    return rows


def _time_axis(axis: Any, start: float, end: float) -> None:
    """Ticks at every whole second step or minute step in range, each one labelled, the range padded to them."""
    import matplotlib.dates as mdates

    span_s = (end - start) * _DAY_S
    if span_s > 3 * 3600:
        auto = mdates.AutoDateLocator()
        axis.xaxis.set_major_locator(auto)
        axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(auto))  # hours to months
        return
    if span_s <= 120:
        step_s = next(s for s in (5, 10, 15, 30, 60) if span_s / s <= 12)
        locator: Any = mdates.SecondLocator(bysecond=range(0, 60, step_s))
        label = "%H:%M:%S"
    else:
        step_s = 60 * next(m for m in (1, 2, 5, 10, 15, 30, 60) if span_s / 60 / m <= 15)
        locator = (mdates.MinuteLocator(byminute=range(0, 60, step_s // 60)) if step_s < 3600
                   else mdates.HourLocator())
        label = "%H:%M"
    step = step_s / _DAY_S
    axis.set_xlim(math.floor(start / step) * step, max(math.ceil(end / step), math.floor(start / step) + 1) * step)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.DateFormatter(label))


def _inline(svg: str) -> str:
    """The <svg> element alone: the XML prolog and its DOCTYPE (an external DTD) do not belong in HTML."""
    return svg[svg.index("<svg"):]
