"""CLI: `mcp-sim import openapi` and `mcp-sim install claude-desktop`."""

from __future__ import annotations

from pathlib import Path

import click

from mcp_sim.cli.errors import handle_errors


def register(cli: click.Group) -> None:
    """Add the `import` and `install` groups (or these commands to groups of those names already there)."""
    _group(cli, "import", "Make a tool spec from another description of an API.").add_command(openapi)
    _group(cli, "install", "Install a simulated server into an MCP client.").add_command(claude_desktop)


def _group(cli: click.Group, name: str, help_text: str) -> click.Group:
    existing = cli.commands.get(name)
    if isinstance(existing, click.Group):
        return existing
    group = click.Group(name, help=help_text)
    cli.add_command(group)
    return group


@click.command()
@click.argument("document")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Spec file to write (.yaml, .yml or .json).")
@click.option("--tag", "tags", multiple=True, help="Only operations with this tag (repeatable).")
@click.option("--path", "path_globs", multiple=True,
              help="Only operations whose path matches this glob: * within a segment, ** across (repeatable).")
@click.option("--name", default=None, help="The simulated server's name (default: the document's title).")
@handle_errors
def openapi(document: str, out: Path, tags: tuple[str, ...], path_globs: tuple[str, ...], name: str | None) -> None:
    """Turn a local OpenAPI 3.0/3.1 or Swagger 2.0 file (JSON or YAML) into a tool spec: one tool per operation."""
    from mcp_sim.sources.openapi import import_openapi, write_spec

    result = import_openapi(Path(document), tags=list(tags), paths=list(path_globs), name=name)
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    write_spec(result.document, out)
    click.echo(f"wrote {out}: {len(result.document['tools'])} tools ({result.skipped} skipped)")


@click.command("claude-desktop", context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, required=True, type=click.UNPROCESSED, metavar="SPECS... [SERVE OPTIONS]")
@click.option("--name", default=None, help="The server's name in Claude Desktop (default: SPEC-simulated).")
@click.option("--config", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The config file (default: Claude Desktop's own for this operating system).")
@click.pass_context
@handle_errors
def claude_desktop(ctx: click.Context, args: tuple[str, ...], name: str | None, config: Path | None) -> None:
    """Add (or update) a server in Claude Desktop's config that serves SPEC... with this install of mcp-sim.

    Any option of `mcp-sim serve` may follow (--model, --faults, --cache, --scenario, ...); paths in them are
    written as absolute paths, since Claude Desktop starts the server from another folder."""
    from mcp_sim.sources.claude_desktop import install_claude_desktop
    from mcp_sim.sources.serve_args import split_serve_args

    specs, serve_options = split_serve_args(ctx.find_root().command, list(args))
    result = install_claude_desktop([Path(spec) for spec in specs], name=name, config=config,
                                    serve_options=serve_options)
    if not result.changed:
        click.echo(f"unchanged: server {result.name!r} in {result.config} already runs this; nothing was written")
        return
    click.echo(f"{'updated' if result.updated else 'added'} server {result.name!r} in {result.config}")
    click.echo(f"backup of the previous config: {result.backup}" if result.backup
               else "there was no config before, so there is no backup")
    click.echo("restart Claude Desktop to load it")
