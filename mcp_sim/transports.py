"""The transports mcp-sim serves on: stdio, and streamable HTTP locked down by default.

stdio: the SDK drops every line it cannot read (bad JSON, a wrong shape, JSON nested deeper than its parser's
limit of about 200 levels) with a debug log line, and takes a request whose id is null, true, a fraction or an
object for a notification; either way the client waits forever. Here each gets a JSON-RPC error, with the
request's id when a shallow scan of the line finds it.

HTTP: binds loopback by default; any other bind needs --allow-remote and a bearer token. Host and Origin are
checked on every bind (DNS rebinding), using the SDK's own TransportSecuritySettings.
"""

from __future__ import annotations

import functools
import hmac
import io
import ipaddress
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

from mcp_sim.errors import McpSimError

if TYPE_CHECKING:  # the SDK takes a second to import; the CLI imports this module for its options only
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.shared.message import SessionMessage
    from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
# The SDK parses stdio lines with pydantic-core, whose JSON parser refuses deeper documents.
PARSER_DEPTH_LIMIT = 200


# --- HTTP: who may connect -------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(host: str, allow_remote: bool, auth_token: str | None) -> None:
    """Refuse a bind that would expose the simulator to the network without --allow-remote and a token."""
    if is_loopback(host) or (allow_remote and auth_token):
        return
    missing = [flag for flag, given in (("--allow-remote", allow_remote), ("--auth-token-env VAR", auth_token))
               if not given]
    raise McpSimError(
        f"refusing to serve HTTP on {host}: that address is reachable from other machines, and nothing there "
        f"may call the simulator without a token. Pass {' and '.join(missing)} (VAR names an environment "
        "variable holding a long random token), or bind --host 127.0.0.1.")


def token_from_env(variable: str) -> str:
    """The bearer token held by `variable`; an empty or missing variable is refused."""
    token = os.environ.get(variable, "").strip()
    if not token:
        raise McpSimError(
            f"--auth-token-env {variable}: the environment variable {variable} is empty or not set. Put a long "
            f"random token in it, e.g. export {variable}="
            "$(python -c 'import secrets; print(secrets.token_urlsafe(32))')")
    return token


def transport_security(host: str, allowed_hosts: Sequence[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection: Host and Origin must name loopback, the bind address or an --allowed-host."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = [*LOOPBACK_NAMES, *allowed_hosts]
    if not is_loopback(host) and host not in ("0.0.0.0", "::", ""):
        names.append(host)  # a client that reaches a LAN bind by its address names that address
    hosts = [pattern for name in names for pattern in _host_patterns(_bracketed(name))]
    origins = [f"{scheme}://{pattern}" for scheme in ("http", "https") for pattern in hosts]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=origins)


def _bracketed(name: str) -> str:
    return f"[{name}]" if name.count(":") >= 2 and not name.startswith("[") else name


def _host_patterns(name: str) -> list[str]:
    has_port = ":" in name.rsplit("]", 1)[-1]
    return [name] if has_port else [name, f"{name}:*"]


class BearerTokenMiddleware:
    """Answer 401 to every request that lacks `Authorization: Bearer <token>`; compared in constant time."""

    def __init__(self, app: ASGIApp, token: str):
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.responses import JSONResponse

        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        response = JSONResponse({"error": "invalid_token",
                                 "error_description": "send the server's token as 'Authorization: Bearer TOKEN'"},
                                status_code=401, headers={"WWW-Authenticate": 'Bearer realm="mcp-sim"'})
        await response(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        header = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        scheme, _, presented = bytes(header).partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(presented.strip(), self._token)


async def serve_http(server: Server, host: str, port: int, path: str = "/mcp", *, allow_remote: bool = False,
                     auth_token: str | None = None, allowed_hosts: Sequence[str] = (),
                     routes: list[Route] | None = None, on_ready: Callable[[], object] | None = None) -> None:
    """Serve streamable HTTP at http://host:port/path, refusing an unsafe bind (see `check_bind`). `routes`
    (the operator's admin routes) sit behind the same token and Host/Origin checks. `on_ready` runs after the
    startup lines are logged: llama.cpp's quiet model load points fd 2 at /dev/null for a moment, and a line
    logged meanwhile from another thread is lost."""
    import uvicorn

    check_bind(host, allow_remote, auth_token)
    app = server.streamable_http_app(streamable_http_path=path, host=host, custom_starlette_routes=routes,
                                     transport_security=transport_security(host, allowed_hosts))
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
    await uvicorn.Server(config).serve()


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
    (llama.cpp's quiet model load points fd 1 at /dev/null for a moment) could leave the protocol writing to
    the null device."""
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


class RecordedLines(io.TextIOWrapper):
    """The protocol's text, decoded as the SDK does; keeps each line until the read stream pairs it with its message.

    The SDK's reader turns each line into exactly one item (a message or the exception that reading it
    raised), in order, so the n-th item received is the n-th line kept.
    """

    def __init__(self, binary: BinaryIO):
        super().__init__(binary, encoding="utf-8", errors="replace")
        self.pending: deque[str] = deque()

    # typeshed gives TextIOWrapper the bytes readline of _IOBase; at run time it returns str.
    def readline(self, size: int = -1, /) -> str:  # type: ignore[override]
        line = super().readline(size)
        if line:
            self.pending.append(line)
        return line

    def close(self) -> None:
        # Not ours to close (the SDK's issue #1933: closing the buffer destroyed sys.stdout for good).
        with suppress(ValueError):
            self.detach()


class AnsweringReadStream:
    """Wraps the transport's read stream: what it could not read, or read wrongly, is answered here, not passed on."""

    def __init__(self, inner: Any, write_stream: Any, lines: deque[str]):
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


def replies_for(item: SessionMessage | Exception, line: str) -> list[types.JSONRPCError] | None:
    """The errors that answer `item` (read from `line`) in the transport's stead; None to pass it on."""
    import mcp_types as types

    if isinstance(item, Exception):
        code, message = _unreadable(item, line)
        return _errors(code, message, scan_ids(line)[0])
    if isinstance(item.message, types.JSONRPCNotification) and not item.message.method.startswith("notifications/"):
        ids, has_id = scan_ids(line)
        if has_id:  # a request whose id is not a string or an integer: the SDK dropped the id and its answer
            return _errors(types.INVALID_REQUEST, "Invalid Request: the id must be a string or an integer", [])
    return None


def _errors(code: int, message: str, ids: list[types.RequestId]) -> list[types.JSONRPCError]:
    """One error per request id, else one with id null (JSON-RPC's answer when the id cannot be read)."""
    import mcp_types as types

    error = types.ErrorData(code=code, message=message)
    answered: list[types.RequestId | None] = [*ids] or [None]
    return [types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error) for request_id in answered]


def _unreadable(exc: Exception, line: str) -> tuple[int, str]:
    """(JSON-RPC code, message) for a line the transport failed to read."""
    import mcp_types as types
    from pydantic import ValidationError

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if errors and errors[0]["type"] == "json_invalid":
        hint = f" (JSON nested deeper than about {PARSER_DEPTH_LIMIT} levels is refused)" \
            if "recursion limit" in errors[0]["msg"] else ""
        return types.PARSE_ERROR, f"Parse error: {errors[0]['msg']}{hint}"
    if not errors:
        return types.PARSE_ERROR, "Parse error: the message could not be read"
    if line.lstrip().startswith("["):
        return types.INVALID_REQUEST, "Invalid Request: MCP does not accept JSON-RPC batches; send one message per line"
    return (types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message; a request reads "
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}')


def scan_ids(line: str) -> tuple[list[types.RequestId], bool]:
    """The valid ids of the message (or of each message of a batch) in `line`, and whether any "id" member was
    seen; parsed or not, as deep or as broken as it may be, without building the document.

    ijson's event stream, not ijson.parse: the prefixes parse builds grow with depth, quadratic in it.
    """
    import ijson

    ids: list[types.RequestId] = []
    has_id, depth, key_depth, value_next = False, 0, 1, False
    try:
        for index, (event, value) in enumerate(ijson.basic_parse(line.encode("utf-8", errors="replace"))):
            if index == 0 and event == "start_array":
                key_depth = 2  # a batch: the ids of its members
            if value_next and _is_request_id(value):
                ids.append(value)
            if value_next and key_depth == 1:
                break
            value_next = event == "map_key" and value == "id" and depth == key_depth
            has_id = has_id or value_next
            depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
    except (ijson.JSONError, ValueError):
        pass  # broken further on: what came before still counts
    return ids, has_id


def _is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
