"""Reach a real MCP server as a client: a stdio command or a streamable HTTP URL."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from mcp_sim.base.errors import McpSimError

T = TypeVar("T")

# A server that keeps handing out cursors must not hang mirror or the proxy.
MAX_PAGES = 100


class UpstreamError(McpSimError):
    """The real server could not be reached or answered something unusable."""


def server_target(command: Sequence[str], url: str | None,
                  env: Mapping[str, str] | None = None) -> StdioServerParameters | str:
    """What `Client` connects to: exactly one of a command (after `--`) or a URL."""
    if url and command:
        raise UpstreamError("give either --url URL or a command after --, not both")
    if url:
        return url
    if not command:
        raise UpstreamError("name the real server: --url URL, or a command after --, "
                            "e.g. `-- npx @modelcontextprotocol/server-memory`")
    # The SDK passes only a few safe variables to a child by default; a command typed by the user
    # expects the user's environment, as a shell would give it (API keys, config paths).
    child_env = {**os.environ, **(env or {})}
    return StdioServerParameters(command=command[0], args=list(command[1:]), env=child_env)


def connect(target: StdioServerParameters | str, **callbacks: Any) -> Client:
    """A client of the real server; `callbacks` (message_handler, sampling_callback, ...) as Client takes them."""
    # "legacy" is the initialize handshake every released server speaks; "auto" would first probe
    # the stateless 2026-07-28 protocol.
    return Client(target, mode="legacy", **callbacks)


async def list_all_tools(client: Client) -> list[types.Tool]:
    """Every tool the server lists, following `nextCursor` page by page."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise UpstreamError(f"tools/list still returned a nextCursor after {MAX_PAGES} pages; giving up")


def parse_env(pairs: Sequence[str]) -> dict[str, str]:
    """`KEY=VALUE` strings (from repeated --env options) as a mapping."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UpstreamError(f"--env {pair!r}: expected KEY=VALUE")
        env[key] = value
    return env


def run_upstream(function: Callable[..., Awaitable[T]], *args: Any, target: Any = None) -> T:
    """Run `function(*args)`; failing to reach or talk to the server becomes UpstreamError.

    Without this, a missing command or a refused connection surfaces as a nested exception group.
    """
    target = target if target is not None else (args[0] if args else None)
    try:
        return anyio.run(function, *args)
    except McpSimError:
        raise
    except Exception as exc:
        cause = _innermost(exc)
        message = f"could not talk to the server {describe(target)}: {type(cause).__name__}: {cause}"
        raise UpstreamError(message) from exc


def describe(target: Any) -> str:
    if isinstance(target, StdioServerParameters):
        return " ".join([target.command, *target.args])
    return str(target)


def _innermost(exc: BaseException) -> BaseException:
    # Duck-typed: BaseExceptionGroup is a builtin only from Python 3.11.
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc
