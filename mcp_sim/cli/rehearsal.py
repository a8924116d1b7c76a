"""`mcp-sim ledger PATH`: what the agent would have changed, as a table, JSON or an HTML page."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click

from mcp_sim.cli.errors import handle_errors
from mcp_sim.rehearsal.ledger import LedgerEntry, LedgerError, read_ledger, summarize


def register(cli: click.Group) -> None:
    """Add the `ledger` command to the CLI."""
    cli.add_command(ledger)


@click.command("ledger")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table",
              show_default=True, help="A table with a summary, or the entries as a JSON list.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a self-contained HTML page (timeline per world, chart) here.")
@handle_errors
def ledger(path: Path, output_format: str, html_path: Path | None) -> None:
    """Show the calls recorded with --ledger: every call of a tool that may change the world."""
    entries = read_ledger(path)
    if output_format == "json":
        click.echo(json.dumps([e.model_dump(mode="json") for e in entries], indent=2, ensure_ascii=False))
    else:
        _print_table(entries)
    if html_path is not None:
        _write_html(entries, html_path, to_stderr=output_format == "json")


def _print_table(entries: Sequence[LedgerEntry]) -> None:
    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)  # writes to sys.stdout as it is at print time (CliRunner swaps it)
    if console.width < TABLE_MIN_WIDTH:
        _print_blocks(entries, console.width)
        click.echo(summarize(entries))
        return
    table = Table(box=box.SIMPLE_HEAD, caption="times in UTC", expand=True)
    # Times and tool names never wrap; the rest folds, each column at least as wide as its heading.
    table.add_column("time", no_wrap=True)
    table.add_column("world", overflow="fold", max_width=16, min_width=5)
    table.add_column("tool", no_wrap=True)
    table.add_column("arguments", overflow="fold", ratio=3, min_width=9)
    table.add_column("outcome", overflow="fold", ratio=2, min_width=7)
    table.add_column("faults", overflow="fold", min_width=7)
    table.add_column("ms", no_wrap=True, justify="right")
    for e in entries:  # agent text is escaped: "[bold]" in an argument is data, not markup
        tool = escape(e.tool) + ("\n[bold red](destructive)[/]" if e.destructive else "")
        outcome = f"[red]error[/]: {escape(_short(e.result))}" if e.is_error else "ok"
        latency = "" if e.latency_ms is None else f"{e.latency_ms:.0f}"
        table.add_row(e.time.strftime("%H:%M:%S"), escape(e.world), tool, escape(_short(json.dumps(e.arguments))),
                      outcome, escape(", ".join(e.faults)), latency)
    if entries:
        console.print(table)
    click.echo(summarize(entries))


# Narrower than this, seven columns break words apart ("outcom" / "e"): each call becomes a block of lines.
TABLE_MIN_WIDTH = 120


def _print_blocks(entries: Sequence[LedgerEntry], width: int) -> None:
    """One call per block: a heading line, then arguments, outcome and faults wrapped between words."""
    import textwrap

    for e in entries:
        heading = [e.time.strftime("%H:%M:%S UTC"), e.world, e.tool + (" (destructive)" if e.destructive else "")]
        if e.latency_ms is not None:
            heading.append(f"{e.latency_ms:.0f} ms")
        click.echo("  ".join(heading))
        outcome = f"error: {_short(e.result)}" if e.is_error else "ok"
        for label, text in (("arguments", _short(json.dumps(e.arguments))), ("outcome", outcome),
                            ("faults", ", ".join(e.faults))):
            if text:
                click.echo(textwrap.fill(text, width=max(width - 1, 40), initial_indent=f"  {label:<10} ",
                                         subsequent_indent=" " * 13, break_long_words=False,
                                         break_on_hyphens=False))
        click.echo("")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _write_html(entries: Sequence[LedgerEntry], path: Path, to_stderr: bool) -> None:
    from mcp_sim.rehearsal.ledger_report import render_html

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_html(entries), encoding="utf-8")
    except OSError as exc:
        raise LedgerError(f"cannot write the page {path}: {exc.strerror}") from None
    click.echo(f"Wrote {path}", err=to_stderr)
