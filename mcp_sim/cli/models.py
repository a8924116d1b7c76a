"""The `mcp-sim models` commands (list, pull) and `mcp-sim doctor`."""

from __future__ import annotations

import sys
from typing import Any

import click

from mcp_sim.cli.errors import handle_errors
from mcp_sim.cli.options import engine_options


@click.group("models")
def models() -> None:
    """Known world models: what there is, what is here, and downloads."""


@models.command("list")
@handle_errors
def list_models() -> None:
    """Known models and quants, their sizes, and which are on this machine (and where)."""
    _list_models()


@models.command("pull")
@click.argument("spec")
@handle_errors
def pull(spec: str) -> None:
    """Download SPEC (NAME[:QUANT], OWNER/REPO:QUANT or hf://OWNER/REPO/FILE.gguf) into the HF cache.

    Honours HF_TOKEN, HF_HOME and HF_HUB_OFFLINE; an interrupted download resumes."""
    from mcp_sim.models.hub import pull as pull_model

    resolved = pull_model(spec)
    click.echo(f"{spec}: {resolved.path} ({_size(resolved.path.stat().st_size)}, {resolved.source})")


@click.command("doctor")
@engine_options
def doctor(**engine: Any) -> None:
    """Check Python, the llama.cpp build, the model that would load and its memory needs.

    Exits 1 when something blocks serving. Takes the same model options as `serve`."""
    _doctor(engine)


def register(cli: click.Group) -> None:
    cli.add_command(models)
    cli.add_command(doctor)


def _list_models() -> None:
    from mcp_sim.models.hub import hub_cache_dir, locate, offline
    from mcp_sim.models.registry import load_registry, local_gguf_files

    registry = load_registry()
    rows = [("NAME", "QUANT", "SIZE", "WHERE")]
    for manifest in sorted(registry.values(), key=lambda m: m.name):
        for quant in manifest.quants.values():
            found = locate(manifest, quant)
            size = found[0].stat().st_size if found else quant.size
            default = "*" if quant.name == manifest.default_quant else ""
            pull = f"mcp-sim models pull {manifest.name}:{quant.name}"
            where = f"{found[1]}: {found[0]}" if found else f"not here: {pull}"
            rows.append((manifest.name, quant.name + default, _size(size), where))
    known_files = {q.file for m in registry.values() for q in m.quants.values()}
    for name, path in local_gguf_files().items():
        if name not in known_files:
            rows.append((name, "-", _size(path.stat().st_size), f"models folder: {path}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        click.echo("  ".join([*cells, row[3]]))
    click.echo(f"\n* default quant. Hugging Face cache: {hub_cache_dir()}"
               + (" (HF_HUB_OFFLINE is set: nothing will be downloaded)" if offline() else ""))


def _doctor(engine: dict[str, Any]) -> None:
    from mcp_sim.app.doctor import FAIL, WARN, blocking, diagnose
    from mcp_sim.core.engine_setup import EngineSettings

    checks = diagnose(EngineSettings(**engine))
    marks = {FAIL: "FAIL", WARN: "warn"}
    for check in checks:
        click.echo(f"[{marks.get(check.status, ' ok ')}] {check.name}: {check.detail}")
    if blocking(checks):
        click.echo("Something above blocks serving.", err=True)
        sys.exit(1)
    click.echo("Ready to serve.")


def _size(size: int | None) -> str:
    if size is None:
        return "?"
    return f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"
