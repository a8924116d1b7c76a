"""`mcp-sim cache stats|export|clear PATH`: look into a response cache, copy it out, empty it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from mcp_sim.cli.errors import handle_errors
from mcp_sim.rehearsal.cache import ResponseCache


def register(cli: click.Group) -> None:
    """Add the `cache` command group to CLI."""
    cli.add_command(cache_group)


@click.group("cache")
def cache_group() -> None:
    """The response cache that --cache fills and --replay-only answers from."""


CACHE_PATH = click.argument("path", type=click.Path(dir_okay=False, path_type=Path))


@cache_group.command("stats")
@CACHE_PATH
@click.option("--json", "as_json", is_flag=True, help="Print the figures as one JSON object.")
@handle_errors
def stats(path: Path, as_json: bool) -> None:
    """Entries in all, per tool and per model, and the size on disk."""
    with _open(path) as cache:
        figures = cache.stats()
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    click.echo(f"{figures['path']}: {figures['entries']} entries, {_size(figures['size_bytes'])} on disk")
    for tool, count in figures["tools"].items():
        click.echo(f"  tool {tool}: {count}")
    for model in figures["models"]:
        click.echo(f"  model {model['model_name']} (sha256 {model['model_hash'][:12]}): {model['entries']}")


@cache_group.command("export")
@CACHE_PATH
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The JSONL file to write: one entry per line, with its result parsed.")
@handle_errors
def export(path: Path, out: Path) -> None:
    """Write every cached answer to a JSONL file."""
    with _open(path) as cache:
        count = cache.export(out)
    click.echo(f"{count} entries written to {out}")


@cache_group.command("clear")
@CACHE_PATH
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@handle_errors
def clear(path: Path, yes: bool) -> None:
    """Remove every cached answer (the file stays, empty)."""
    with _open(path) as cache:
        if not yes:
            click.confirm(f"Remove all {cache.stats()['entries']} entries from {path}?", abort=True)
        removed = cache.clear()
    click.echo(f"{removed} entries removed from {path}")


def _open(path: Path) -> ResponseCache:
    # These commands only read or empty a cache: a mistyped path must not create a new one.
    return ResponseCache(path, create=False)


def _size(size: float) -> str:
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
