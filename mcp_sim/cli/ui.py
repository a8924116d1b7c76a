"""`mcp-sim ui URL`: open the world page of a server that is already running (its calls, state and changes)."""

from __future__ import annotations

import webbrowser
from urllib.parse import quote, urlsplit

import click
import httpx

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.cli.options import handle_errors
from mcp_sim.serving.http_guard import UI_PATH, token_from_env

# What every world page holds: the answer came from mcp-sim's page, not from whatever else listens there.
PAGE_MARKER = "data-events="


@click.command()
@click.argument("url", default=f"http://{defaults.HOST}:{defaults.PORT}{UI_PATH}")
@click.option("--no-open", is_flag=True, help="Print the page's address; do not open a browser.")
@click.option("--auth-token-env", metavar="VAR", default=None,
              help="The server requires a bearer token (serve --auth-token-env): VAR holds it. The browser is "
                   "opened with it once (?token=) and the page keeps it in an HttpOnly cookie.")
@handle_errors
def ui(url: str, no_open: bool, auth_token_env: str | None) -> None:
    """Open the world page of the server at URL (serve --transport http, or serve --ui-port): a live view of
    each world's calls, its state as tables and what each call changed. URL may name the server, its /mcp
    endpoint or the page itself."""
    page = page_address(url)
    token = token_from_env(auth_token_env) if auth_token_env else None
    check_page(page, token)
    click.echo(f"world page: {page}")
    if not no_open:
        webbrowser.open(page + (f"?token={quote(token, safe='')}" if token else ""))


def page_address(url: str) -> str:
    """The page of the server URL names: its root, its MCP endpoint (/mcp) or the page itself."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if not parts.netloc:
        raise click.BadParameter(f"{url!r} names no server: give http://HOST:PORT", param_hint="URL")
    return f"{parts.scheme}://{parts.netloc}{UI_PATH}"


def check_page(page: str, token: str | None) -> None:
    """Refuse a server that does not answer the page (not running, not mcp-sim, the token missing)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(page, headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise McpSimError(f"cannot reach {page}: {exc}. Is `mcp-sim serve --transport http` (or serve "
                          "--ui-port PORT) running there?") from None
    if response.status_code == 401:
        raise McpSimError(f"{page} wants the server's token: pass --auth-token-env VAR (VAR holding it)")
    if response.status_code != 200 or PAGE_MARKER not in response.text:
        raise McpSimError(f"{page} answered {response.status_code} without the world page: is it an mcp-sim "
                          "server of this version?")


def register(cli: click.Group) -> None:
    cli.add_command(ui)
