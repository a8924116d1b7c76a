"""The transports mcp-sim serves on: stdio, and streamable HTTP locked down by default.

stdio: the SDK drops every line it cannot read (bad JSON, a wrong shape, JSON nested deeper than its parser's
limit of about 200 levels) with a debug log line, takes a request whose id is null, true, a fraction or an
object for a notification, and reads a line of any length whole; either way the client waits forever (or the
server's memory runs out). Here each gets a JSON-RPC error, with the request's id when a shallow scan of the
line finds it, and a line over `defaults.STDIO_MAX_LINE_CHARS` is refused without being held.

HTTP: binds loopback by default; any other bind needs --allow-remote and a bearer token. Host and Origin are
checked on every bind (DNS rebinding), using the SDK's own TransportSecuritySettings; what a body may be is
checked before the SDK reads it. The checks live in http_guard.py.
"""

from __future__ import annotations

import functools
import io
import logging
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO

import anyio
import click
from starlette.routing import Route

from mcp_sim.base import defaults
from mcp_sim.serving.http_guard import (
    BearerTokenMiddleware,
    JsonRpcBodyGuard,
    PageHostGuard,
    check_bind,
    is_loopback,
    token_from_env,
    transport_security,
)
from mcp_sim.serving.jsonrpc_refusals import BAD_ID, SCAN_HEAD_BYTES, errors, misread_request, scan_ids, too_large

if TYPE_CHECKING:  # the SDK takes a second to import; the CLI imports this module for its options only
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

# The SDK parses stdio lines with pydantic-core, whose JSON parser refuses deeper documents.
PARSER_DEPTH_LIMIT = 200


# --- HTTP ---------------------------------------------------------------------------------------------


async def serve_http(server: Server, host: str, port: int, path: str = "/mcp", *, allow_remote: bool = False,
                     auth_token: str | None = None, allowed_hosts: Sequence[str] = (),
                     routes: list[Route] | None = None, on_ready: Callable[[], object] | None = None,
                     on_listening: Callable[[], object] | None = None) -> None:
    """Serve streamable HTTP at http://host:port/path, refusing an unsafe bind (see `check_bind`). `routes`
    (the operator's admin routes) sit behind the same token and Host/Origin checks. `on_ready` runs after the
    startup lines are logged. `on_listening` runs once the socket accepts connections."""
    import uvicorn

    from mcp_sim.serving.event_store import MemoryEventStore

    check_bind(host, allow_remote, auth_token)
    security = transport_security(host, allowed_hosts)
    # An event store makes the SDK prime each SSE stream (an id, `retry`) and replay it after a reconnect.
    app = server.streamable_http_app(streamable_http_path=path, host=host, custom_starlette_routes=routes,
                                     transport_security=security, max_request_body_size=defaults.HTTP_MAX_BODY_BYTES,
                                     event_store=MemoryEventStore(), retry_interval=defaults.SSE_RETRY_MS)
    # Starlette runs the middleware added last first: the token is checked before the body is read.
    app.add_middleware(JsonRpcBodyGuard, path=path, security=security)
    app.add_middleware(PageHostGuard, security=security)
    if auth_token:
        app.add_middleware(BearerTokenMiddleware, token=auth_token)
    if not is_loopback(host):
        logger.warning("mcp-sim: serving HTTP on %s:%d, REACHABLE FROM OTHER MACHINES; every request needs the "
                       "bearer token; Host/Origin allowed: loopback%s", host, port,
                       "".join(f", {name}" for name in allowed_hosts))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    logger.info("serving streamable HTTP at http://%s:%d%s", host, port, path)
    if on_ready is not None:
        on_ready()
    server_ = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        if on_listening is not None:
            group.start_soon(_when_started, server_, on_listening)
        await server_.serve()
        group.cancel_scope.cancel()


async def serve_page(routes: list[Route], port: int, host: str = defaults.HOST) -> None:
    """Serve ROUTES (the world page beside a stdio server) on loopback with the same Host/Origin checks as
    serve_http; until cancelled."""
    import uvicorn
    from starlette.applications import Starlette

    check_bind(host, allow_remote=False, auth_token=None)
    app = Starlette(routes=routes)
    app.add_middleware(PageHostGuard, security=transport_security(host))
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    logger.info("serving the world page at http://%s:%d/ui", host, port)
    await uvicorn.Server(config).serve()


async def _when_started(server: Any, callback: Callable[[], object]) -> None:
    while not server.started:
        await anyio.sleep(0.05)
    callback()


@dataclass(frozen=True)
class HttpSecurity:
    """What `http_security_options` collected from the command line."""

    allow_remote: bool = False
    auth_token_env: str | None = None
    allowed_hosts: tuple[str, ...] = ()

    def check(self, host: str) -> None:
        """Refuse an unsafe bind before anything heavy is loaded."""
        check_bind(host, self.allow_remote, self.auth_token())

    def auth_token(self) -> str | None:
        return token_from_env(self.auth_token_env) if self.auth_token_env else None

    def serve_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `serve_http`."""
        return {"allow_remote": self.allow_remote, "auth_token": self.auth_token(),
                "allowed_hosts": self.allowed_hosts}


def http_security_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --allow-remote, --auth-token-env and --allowed-host; the command receives `http_security`."""

    @functools.wraps(command)
    def wrapper(*args: Any, allow_remote: bool, auth_token_env: str | None, allowed_hosts: tuple[str, ...],
                **kwargs: Any) -> Any:
        security = HttpSecurity(allow_remote, auth_token_env, tuple(allowed_hosts))
        return command(*args, http_security=security, **kwargs)

    options = [
        click.option("--allow-remote", is_flag=True,
                     help="Allow an HTTP bind other than loopback (e.g. --host 0.0.0.0); needs --auth-token-env."),
        click.option("--auth-token-env", metavar="VAR", default=None,
                     help="Require 'Authorization: Bearer TOKEN' on every HTTP request, TOKEN being the value of "
                     "the environment variable VAR."),
        click.option("--allowed-host", "allowed_hosts", metavar="HOST", multiple=True,
                     help="A name clients use to reach the server (Host and Origin headers), besides loopback and "
                     "the bind address; any port. Repeatable. Others are refused (DNS-rebinding protection)."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


# --- stdio: every line gets an answer --------------------------------------------------------------------


async def serve_stdio(server: Server, on_ready: Callable[[], object] | None = None) -> None:
    """Serve over stdin/stdout; a line the SDK cannot read, or reads wrongly, is answered with a JSON-RPC error.

    `on_ready` runs once the transport holds its private copies of fd 0 and 1: work started before then
    (anything that redirects fd 1 for a moment) could leave the protocol writing to the null device."""
    from mcp.server.stdio import stdio_server

    with _protocol_stdin() as binary:
        lines = RecordedLines(binary)
        async with stdio_server(stdin=anyio.wrap_file(lines)) as (read_stream, write_stream):
            if on_ready is not None:
                on_ready()
            answering = AnsweringReadStream(read_stream, write_stream, lines.pending)
            await server.run(answering, write_stream, server.create_initialization_options())


@contextmanager
def _protocol_stdin() -> Iterator[BinaryIO]:
    """fd 0 for the protocol alone, as the SDK arranges for its own reader (it skips that for a stream handed
    to it): the protocol is read from a private duplicate while fd 0 reads /dev/null."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # Never closed: a worker thread may still block reading it after the transport exits.
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


@dataclass(frozen=True)
class OverlongLine:
    """A line over the limit, in place of its text: its head (for the id) and its length, the newline included."""

    head: str
    length: int


class RecordedLines(io.TextIOWrapper):
    """The protocol's text, decoded as the SDK does; keeps each line until the read stream pairs it with its message.

    The SDK's reader turns each line into exactly one item (a message or the exception that reading it
    raised), in order, so the n-th item received is the n-th line kept. A line over `max_line` characters is
    read no further than the limit and skipped in small pieces; the SDK is handed a blank line in its place
    (which it fails to read, so an item still comes for it).
    """

    def __init__(self, binary: BinaryIO, max_line: int = defaults.STDIO_MAX_LINE_CHARS):
        super().__init__(binary, encoding="utf-8", errors="replace")
        self.pending: deque[str | OverlongLine] = deque()
        self._max_line = max_line

    # typeshed gives TextIOWrapper the bytes readline of _IOBase; at run time it returns str.
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        line = super().readline(self._max_line + 1 if size < 0 else size)
        if len(line) > self._max_line and not line.endswith("\n"):
            self.pending.append(OverlongLine(line[:SCAN_HEAD_BYTES], len(line) + self._skip_rest()))
            return "\n"
        if line:
            self.pending.append(line)
        return line

    def _skip_rest(self) -> int:
        """Read past the end of the current line, a piece at a time; the number of characters skipped."""
        skipped = 0
        while piece := super().readline(SCAN_HEAD_BYTES):
            skipped += len(piece)
            if piece.endswith("\n"):
                break
        return skipped

    def close(self) -> None:
        # Not ours to close (the SDK's issue #1933: closing the buffer destroyed sys.stdout for good).
        with suppress(ValueError):
            self.detach()


class AnsweringReadStream:
    """Wraps the transport's read stream: what it could not read, or read wrongly, is answered here, not passed on."""

    def __init__(self, inner: Any, write_stream: Any, lines: deque[str | OverlongLine]):
        self._inner = inner
        self._write = write_stream
        self._lines = lines

    @property
    def last_context(self) -> Any:
        # The SDK's dispatcher runs each message in its sender's context; pass it through.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._inner.receive()
            line = self._lines.popleft() if self._lines else ""
            replies = replies_for(item, line)
            if replies is None:
                return item
            await self._answer(replies)

    async def _answer(self, replies: list[types.JSONRPCError]) -> None:
        from mcp.shared.message import SessionMessage

        for reply in replies:
            logger.info("answered an unreadable message: %s", reply.error.message)
            try:
                await self._write.send(SessionMessage(reply))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return  # the client is gone: nobody left to answer

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReadStream:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReadStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


def replies_for(item: SessionMessage | Exception, line: str | OverlongLine) -> list[types.JSONRPCError] | None:
    """The errors that answer `item` (read from `line`) in the transport's stead; None to pass it on."""
    import mcp_types as types

    if isinstance(line, OverlongLine):
        message = too_large(f"a line of {line.length:,} characters", defaults.STDIO_MAX_LINE_CHARS, "characters")
        return errors(types.INVALID_REQUEST, message, scan_ids(line.head)[0])
    if isinstance(item, Exception):
        code, message = _unreadable(item, line)
        return errors(code, message, scan_ids(line)[0])
    if isinstance(item.message, types.JSONRPCNotification) and misread_request(item.message.method, scan_ids(line)[1]):
        return errors(types.INVALID_REQUEST, BAD_ID, [])  # the SDK dropped the id, and with it the answer
    return None


def _unreadable(exc: Exception, line: str) -> tuple[int, str]:
    """(JSON-RPC code, message) for a line the transport failed to read."""
    import mcp_types as types
    from pydantic import ValidationError

    problems = exc.errors() if isinstance(exc, ValidationError) else []
    if problems and problems[0]["type"] == "json_invalid":
        hint = f" (JSON nested deeper than about {PARSER_DEPTH_LIMIT} levels is refused)" \
            if "recursion limit" in problems[0]["msg"] else ""
        return types.PARSE_ERROR, f"Parse error: {problems[0]['msg']}{hint}"
    if not problems:
        return types.PARSE_ERROR, "Parse error: the message could not be read"
    if line.lstrip().startswith("["):
        return types.INVALID_REQUEST, "Invalid Request: MCP does not accept JSON-RPC batches; send one message per line"
    return (types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message; a request reads "
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}')
