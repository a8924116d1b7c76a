"""Every transport `serve` speaks, in one registry: what each needs checked before anything heavy loads, where
it says it is ready, how a request names its world there, and how it serves.

Adding a transport is one class (here or in a module of its own) plus its line in `TRANSPORTS`; `--transport`
then offers it, and `serve` runs it with no other change.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from mcp.server import Server
from starlette.routing import Route

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.serving.http_guard import UI_PATH
from mcp_sim.serving.transports import HttpSecurity, serve_http, serve_page, serve_stdio

Serving = Callable[[], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Endpoint:
    """Where a network transport listens, and how it guards itself (the options of `serve`)."""

    host: str
    port: int
    path: str
    security: HttpSecurity = field(default_factory=HttpSecurity)
    ui_port: int | None = None  # stdio: where the world page is served (loopback), if anywhere


@dataclass(frozen=True)
class Launch:
    """What a transport is handed to serve: the server, the operator's routes (admin and the world page), and
    two callbacks: `on_ready` once the transport owns its streams, `announce` to print the startup line."""

    server: Server
    admin_routes: Callable[[bool], list[Route]]  # given whether remote callers are allowed
    on_ready: Callable[[], object] | None
    announce: Callable[[], object]


class TransportKind(Protocol):
    name: str
    summary: str
    # How a request names its world on this transport, for the startup line.
    world_hint: str

    def check(self, endpoint: Endpoint) -> None:
        """Refuse an unsafe setup before the model loads."""

    def where(self, endpoint: Endpoint) -> str:
        """The startup line's 'ready at ...'."""

    def serving(self, endpoint: Endpoint, launch: Launch) -> Serving:
        """The coroutine function that serves until the process stops."""

    def page(self, endpoint: Endpoint) -> str | None:
        """The world page's address, if this setup serves it."""


class Stdio:
    name = "stdio"
    summary = "one client on stdin/stdout (Claude Desktop, the Inspector)"
    world_hint = '_meta {"mcp-sim/world": NAME} on a call picks a world'

    def check(self, endpoint: Endpoint) -> None:
        pass

    def where(self, endpoint: Endpoint) -> str:
        return "serving on stdio"

    def page(self, endpoint: Endpoint) -> str | None:
        return None if endpoint.ui_port is None else f"http://{defaults.HOST}:{endpoint.ui_port}{UI_PATH}"

    def serving(self, endpoint: Endpoint, launch: Launch) -> Serving:
        async def run() -> None:
            launch.announce()  # before the protocol owns stdout; the line goes to stderr
            if endpoint.ui_port is None:
                await serve_stdio(launch.server, launch.on_ready)
                return
            async with anyio.create_task_group() as group:
                # The page's routes on loopback, no token: stdio serves one local client.
                group.start_soon(serve_page, launch.admin_routes(False), endpoint.ui_port)
                await serve_stdio(launch.server, launch.on_ready)
                group.cancel_scope.cancel()  # the client hung up: the page goes with the server

        return run


class StreamableHttp:
    name = "http"
    summary = "streamable HTTP, many clients, stateless or with sessions"
    world_hint = "?world=NAME in the URL picks a world"

    def check(self, endpoint: Endpoint) -> None:
        if endpoint.ui_port is not None:
            raise McpSimError(f"--ui-port is for --transport stdio; over HTTP the world page is at {UI_PATH} on "
                              "the server's own port")
        endpoint.security.check(endpoint.host)

    def where(self, endpoint: Endpoint) -> str:
        return f"ready at http://{endpoint.host}:{endpoint.port}{endpoint.path}"

    def page(self, endpoint: Endpoint) -> str | None:
        return f"http://{endpoint.host}:{endpoint.port}{UI_PATH}"

    def serving(self, endpoint: Endpoint, launch: Launch) -> Serving:
        token = endpoint.security.auth_token()

        async def run() -> None:
            # The admin routes see and change every world: loopback only, unless every request carries the token.
            await serve_http(launch.server, endpoint.host, endpoint.port, endpoint.path,
                             routes=launch.admin_routes(token is not None), on_ready=launch.on_ready,
                             on_listening=launch.announce, **endpoint.security.serve_kwargs())

        return run


TRANSPORTS: dict[str, TransportKind] = {kind.name: kind for kind in (Stdio(), StreamableHttp())}
