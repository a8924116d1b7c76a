"""What stands between the network and the SDK's streamable HTTP transport: who may connect (the bind, a bearer
token, Host and Origin), and what a POSTed body may be (`JsonRpcBodyGuard`).

The SDK's transport leaves two bodies unanswered in JSON-RPC: one over its size limit gets a plain-text 413, and
a request whose id is null, true, a fraction or an object is taken for a notification (202, no body: the
client waits forever). The guard answers both with a JSON-RPC error, as the stdio transport does.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.serving.jsonrpc_refusals import (
    BAD_ID,
    SCAN_HEAD_BYTES,
    errors,
    is_request_id,
    misread_request,
    scan_ids,
    too_large,
    wire,
)

if TYPE_CHECKING:  # the SDK takes a second to import; the CLI imports this module for its options only
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


# --- who may connect -------------------------------------------------------------------------------------


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


# The world page (mcp_sim.serving.ui). A browser cannot send a bearer header: the page takes the token once as
# ?token= on UI_PATH and keeps it in an HttpOnly, SameSite=Strict cookie that only the page's paths accept.
UI_PATH = "/ui"
UI_COOKIE = "mcp_sim_ui_token"


class BearerTokenMiddleware:
    """Answer 401 to every request that lacks `Authorization: Bearer <token>`; compared in constant time. The
    world page's paths also take the token as the UI_COOKIE cookie, and UI_PATH itself as ?token=."""

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
        if scheme.lower() == b"bearer" and hmac.compare_digest(presented.strip(), self._token):
            return True
        return on_ui_path(scope["path"]) and any(hmac.compare_digest(offered, self._token)
                                                 for offered in _ui_tokens(scope))


def on_ui_path(path: str) -> bool:
    return path == UI_PATH or path.startswith(UI_PATH + "/")


def _ui_tokens(scope: Scope) -> list[bytes]:
    """The tokens a browser offers the world page: its cookie, and ?token= on the page's first address."""
    from http.cookies import SimpleCookie
    from urllib.parse import parse_qs

    offered = []
    for name, value in scope["headers"]:
        if name == b"cookie":
            cookies: SimpleCookie = SimpleCookie()
            cookies.load(bytes(value).decode("latin-1"))
            if UI_COOKIE in cookies:
                offered.append(cookies[UI_COOKIE].value.encode())
    if scope["path"] == UI_PATH and scope["method"] == "GET":
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        offered += [token.encode() for token in query.get("token", [])]
    return offered


class PageHostGuard:
    """The SDK's Host and Origin checks (DNS-rebinding protection), applied to the world page's paths: the SDK
    applies them to the MCP endpoint alone."""

    def __init__(self, app: ASGIApp, security: TransportSecuritySettings | None):
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self._security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        if scope["type"] == "http" and on_ui_path(scope["path"]):
            refusal = await self._security.validate_request(Request(scope), is_post=False)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)



# --- what a POSTed body may be ---------------------------------------------------------------------------


class JsonRpcBodyGuard:
    """Reads each POST to the MCP endpoint before the SDK does: a body over `max_body` bytes is answered 413 with a
    JSON-RPC error (read no further than the limit), a request the SDK would take for a notification 400 with
    -32600 and id null, like the SDK's own refusals. Any other body is replayed to the SDK unchanged.

    Host, Origin and Content-Type are checked first, with the SDK's own checks, so a refused client is told
    only what the SDK would tell it."""

    def __init__(self, app: ASGIApp, path: str, security: TransportSecuritySettings | None,
                 max_body: int = defaults.HTTP_MAX_BODY_BYTES):
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self._path = path
        self._security = TransportSecurityMiddleware(security)
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        refusal = await self._security.validate_request(Request(scope), is_post=True)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body, messages = await self._read(scope, receive)
        if body is not None and not _misread_request(body):
            await self.app(scope, _replay(messages, receive), send)
            return
        import mcp_types as types
        from starlette.responses import JSONResponse

        if body is None:  # over the limit: `messages` holds only the head of the body
            head = b"".join(m.get("body", b"") for m in messages)
            message = too_large("the request body", self._max_body, "bytes")
            reply, status = errors(types.INVALID_REQUEST, message, scan_ids(head)[0]), 413
        else:
            reply, status = errors(types.INVALID_REQUEST, BAD_ID, []), 400
        await JSONResponse(wire(reply[0]), status_code=status)(scope, receive, send)

    async def _read(self, scope: Scope, receive: Receive) -> tuple[bytes | None, list[Message]]:
        """(the whole body, the messages that carried it); (None, the first messages) past the limit."""
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), b"")
        over = declared.isdigit() and int(declared) > self._max_body
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":  # the client left: the SDK sees it as it would have
                return b"", messages
            size += len(message.get("body", b""))
            if size > self._max_body or (over and size >= SCAN_HEAD_BYTES):
                return None, messages  # enough to find the id; the rest is never read
            if not message.get("more_body", False):
                return (None if over else b"".join(m.get("body", b"") for m in messages)), messages


def _misread_request(body: bytes) -> bool:
    """Whether the SDK would take `body`, a request with an id it cannot use, for a notification."""
    import mcp_types as types
    import pydantic_core
    from pydantic import ValidationError

    try:
        raw = pydantic_core.from_json(body)  # the SDK's own parser: what it cannot read, it refuses itself
    except ValueError:
        return False
    if not isinstance(raw, dict) or "id" not in raw or is_request_id(raw["id"]):
        return False
    try:
        message = types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return False  # the SDK answers 400 itself
    return isinstance(message, types.JSONRPCNotification) and misread_request(message.method, True)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A receive that hands out `messages` again, then whatever comes next."""
    pending = deque(messages)

    async def replayed() -> Message:
        return pending.popleft() if pending else await receive()

    return replayed
