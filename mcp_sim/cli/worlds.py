"""`mcp-sim worlds`: list, show, reset, fork, export and import the worlds of a running HTTP server."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import click
import httpx

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.cli.errors import handle_errors

ADMIN_PATH = "/admin/worlds"  # mirrors mcp_sim.serving.admin, which this client never imports (no server deps)


class AdminError(McpSimError):
    """The server's admin routes could not be reached or refused the request."""


def _url_option(command: Any) -> Any:
    return click.option("--url", default=f"http://{defaults.HOST}:{defaults.PORT}", show_default=True,
                        help="The running server (its root or its MCP URL).")(command)


def _request(url: str, method: str, path: str = "", body: Any = None, **params: str) -> Any:
    parts = urlsplit(url)
    base = f"{parts.scheme or 'http'}://{parts.netloc or parts.path}"
    try:
        response = httpx.request(method, base + ADMIN_PATH + path, params=params, json=body, timeout=30)
    except httpx.HTTPError as exc:
        raise AdminError(f"cannot reach {base}: {exc}. Is `mcp-sim serve --transport http` running there?") from None
    try:
        body = response.json()
    except ValueError:
        raise AdminError(f"{base} answered {response.status_code} without JSON: is it an mcp-sim server?") from None
    if response.status_code >= 400:
        raise AdminError(body.get("error", f"HTTP {response.status_code}") if isinstance(body, dict) else body)
    return body


@click.group("worlds")
def worlds() -> None:
    """The simulated worlds of a running HTTP server (admin routes, loopback only)."""


@worlds.command("list")
@_url_option
@handle_errors
def list_worlds(url: str) -> None:
    """Every world: scenario, calls, turns."""
    rows = _request(url, "GET")
    click.echo(f"{'WORLD':<40} {'SCENARIO':<20} {'CALLS':>6} {'TURNS':>6}  FORKED FROM")
    for row in rows:
        click.echo(f"{row['name']:<40} {row['scenario']:<20} {row['calls']:>6} {row['turns']:>6}  "
                   f"{row['forked_from'] or ''}")


@worlds.command("show")
@click.argument("name")
@_url_option
@handle_errors
def show(name: str, url: str) -> None:
    """A world's scenario and every call answered in it."""
    world = _request(url, "GET", f"/{name}")
    click.echo(f"world {world['name']}: scenario {world['scenario']}, {world['calls']} call(s)")
    for source, turns in world["history"].items():
        click.echo(f"\n{source}")
        for number, turn in enumerate(turns, start=1):
            click.echo(f"  {number:>3}. {turn['action']}\n       -> {turn['observation']}")
    for source, live in world.get("state", {}).items():
        click.echo(f"\nlive state of {source}:\n{json.dumps(live['data'], indent=2, ensure_ascii=False)}")
        for collection, keys in live.get("absent", {}).items():
            click.echo(f"  known not to exist in {collection}: {', '.join(keys)}")


@worlds.command("reset")
@click.argument("name")
@_url_option
@handle_errors
def reset(name: str, url: str) -> None:
    """Empty a world's history (its scenario stays)."""
    _request(url, "POST", f"/{name}/reset")
    click.echo(f"reset world {name}")


@worlds.command("fork")
@click.argument("name")
@click.argument("new_name")
@_url_option
@handle_errors
def fork(name: str, new_name: str, url: str) -> None:
    """Copy world NAME into NEW_NAME; the two diverge from here on."""
    _request(url, "POST", f"/{name}/fork", to=new_name)
    click.echo(f"forked world {name} into {new_name}")


@worlds.command("export")
@click.argument("name")
@_url_option
@handle_errors
def export(name: str, url: str) -> None:
    """A world as JSON on stdout (actions and JSON observations as JSON values); `worlds import` reads it."""
    click.echo(json.dumps(as_values(_request(url, "GET", f"/{name}")), indent=2, ensure_ascii=False))


@worlds.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8-sig"))
@click.option("--name", default=None, help="The world to create (default: the exported world's name).")
@_url_option
@handle_errors
def import_(file: Any, name: str | None, url: str) -> None:
    """Create a world from FILE (or - for stdin), as `worlds export` wrote it: the inverse of export."""
    try:
        exported = json.load(file)
    except ValueError as exc:
        raise AdminError(f"{file.name}: not JSON ({exc}); give a file written by `mcp-sim worlds export`") from None
    target = name or (exported.get("name") if isinstance(exported, dict) else None)
    if not isinstance(target, str) or not target:
        raise AdminError(f"{file.name}: no world name in the file; pass --name NAME")
    summary = _request(url, "POST", f"/{target}/import", body=as_texts(exported))
    click.echo(f"imported world {summary['name']}: scenario {summary['scenario']}, {summary['turns']} turn(s)")


# A turn's action and observation are texts inside the server (the very bytes the model was shown). Export
# writes those that are JSON objects or arrays as JSON values, and only when writing the value back gives the
# same text, so import restores every text byte for byte; anything else stays a string.
def as_values(exported: Any) -> Any:
    return _map_turns(exported, _value)


def as_texts(exported: Any) -> Any:
    return _map_turns(exported, _text)


def _map_turns(exported: Any, convert: Any) -> Any:
    if not isinstance(exported, dict) or not isinstance(exported.get("history"), dict):
        return exported
    history = {source: [{**turn, **{key: convert(turn[key]) for key in ("action", "observation") if key in turn}}
                        if isinstance(turn, dict) else turn for turn in turns] if isinstance(turns, list) else turns
               for source, turns in exported["history"].items()}
    return {**exported, "history": history}


def _value(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, dict | list) and _text(value) == text else text


def _text(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value


def register(cli: click.Group) -> None:
    cli.add_command(worlds)
