"""`mcp-sim worlds`: list, show, reset, fork and export the worlds of a running HTTP server."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import click
import httpx

from mcp_sim import defaults
from mcp_sim.cli_errors import handle_errors
from mcp_sim.errors import McpSimError

ADMIN_PATH = "/admin/worlds"  # mirrors mcp_sim.admin, which this client never imports (no server deps)


class AdminError(McpSimError):
    """The server's admin routes could not be reached or refused the request."""


def _url_option(command: Any) -> Any:
    return click.option("--url", default=f"http://{defaults.HOST}:{defaults.PORT}", show_default=True,
                        help="The running server (its root or its MCP URL).")(command)


def _request(url: str, method: str, path: str = "", **params: str) -> Any:
    parts = urlsplit(url)
    base = f"{parts.scheme or 'http'}://{parts.netloc or parts.path}"
    try:
        response = httpx.request(method, base + ADMIN_PATH + path, params=params, timeout=30)
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
    """A world as JSON on stdout."""
    click.echo(json.dumps(_request(url, "GET", f"/{name}"), indent=2, ensure_ascii=False))


def register(cli: click.Group) -> None:
    cli.add_command(worlds)
