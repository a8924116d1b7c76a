"""CLI commands that tie the simulator to real servers: mirror, record, learn, eval."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import click

from mcp_sim.cli import build_simulator, engine_options, handle_errors, logger

# Lets `-- COMMAND --flag` reach the real server untouched.
PASSTHROUGH = {"ignore_unknown_options": True, "allow_interspersed_args": False}


def _server_options(command: Any) -> Any:
    command = click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
                           help="Extra environment variable for a stdio server (repeatable).")(command)
    command = click.option("--url", default=None, help="A streamable HTTP server, e.g. http://host:port/mcp.")(
        command)
    return click.argument("server_command", nargs=-1, type=click.UNPROCESSED)(command)


@click.command(context_settings=PASSTHROUGH)
@_server_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Spec file to write (.yaml, .yml or .json). Default: YAML on stdout.")
@click.option("--skip-invalid", is_flag=True,
              help="Leave out tools the spec loader rejects instead of failing.")
@handle_errors
def mirror(server_command: tuple[str, ...], url: str | None, env_pairs: tuple[str, ...], out: Path | None,
           skip_invalid: bool) -> None:
    """Write a spec of a live server's tools: `mirror --out S.yaml -- COMMAND ARGS` or `mirror --url URL`."""
    from mcp_sim.errors import SpecError
    from mcp_sim.mirror import dump_spec, fetch_server, invalid_tools, spec_document
    from mcp_sim.upstream import parse_env, server_target

    target = server_target(server_command, url, parse_env(env_pairs))
    document = spec_document(anyio.run(fetch_server, target))
    invalid = invalid_tools(document)
    if invalid and not skip_invalid:
        raise SpecError([f"tool {name!r} as the server lists it: {p}" for name, ps in invalid.items() for p in ps]
                        + ["nothing was written; pass --skip-invalid to mirror the other tools"])
    if invalid:
        document["tools"] = [t for t in document["tools"] if t.get("name") not in invalid]
        click.echo(f"skipped {len(invalid)} tool(s) the spec loader rejects: {', '.join(invalid)}", err=True)
    text = dump_spec(document, out)
    if out is None:
        click.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    click.echo(f"wrote {out}: {len(document['tools'])} tool(s) of {document['server']['name']}", err=True)


@click.command(context_settings=PASSTHROUGH)
@_server_options
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="JSONL trace file; calls are appended, one line each.")
@click.option("--redact", "redact_patterns", multiple=True, metavar="REGEX",
              help="Field names whose values are replaced by [REDACTED] (repeatable; replaces the default "
                   "secret-looking names).")
@click.option("--replace", "replacements", multiple=True, metavar="OLD=NEW",
              help="Replace text in recorded arguments and results, e.g. a temp dir by /sandbox (repeatable).")
@click.option("--session", default=None, help="Session name for the stdio agent (default: random).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="How the agent reaches this proxy.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8766, show_default=True)
@handle_errors
def record(server_command: tuple[str, ...], url: str | None, env_pairs: tuple[str, ...], out: Path,
           redact_patterns: tuple[str, ...], replacements: tuple[str, ...], session: str | None, transport: str,
           host: str, port: int) -> None:
    """Proxy a real server and record each tool call: `record --out t.jsonl -- COMMAND ARGS`."""
    from mcp_sim.record import run_proxy
    from mcp_sim.traces import DEFAULT_REDACT_PATTERNS, Redactor
    from mcp_sim.upstream import UpstreamError, parse_env, server_target

    pairs = []
    for item in replacements:
        old, sep, new = item.partition("=")
        if not sep or not old:
            raise UpstreamError(f"--replace {item!r}: expected OLD=NEW")
        pairs.append((old, new))
    target = server_target(server_command, url, parse_env(env_pairs))
    redactor = Redactor(redact_patterns or DEFAULT_REDACT_PATTERNS)
    logger.warning("mcp-sim record: proxying %s over %s, appending calls to %s", url or server_command[0],
                   transport, out)
    anyio.run(lambda: run_proxy(target, out, redactor=redactor, replacements=pairs, session=session,
                                transport=transport, host=host, port=port))


def _unused(*_: Any) -> None:  # keeps imports used until the next commands land
    sys.exit(0)


__all__ = ["build_simulator", "engine_options", "mirror", "record"]
