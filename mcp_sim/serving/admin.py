"""Operator routes on the HTTP server, never advertised to the agent as tools: list, show, reset, fork,
export, import and delete worlds. Loopback only unless the server requires a bearer token of every request: they
show and change every world of the server."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_sim.core.worlds import WorldError, Worlds
from mcp_sim.core.worlds.transfer import restore

ADMIN_PATH = "/admin/worlds"

Handler = Callable[[Request], Awaitable[Response]]


def admin_routes(worlds: Worlds, remote_allowed: bool = False) -> list[Route]:
    def guarded(action: Callable[[Request], Any], with_body: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            if not remote_allowed and not is_loopback_client(request):
                return JSONResponse({"error": "the admin routes answer loopback clients only"}, status_code=403)
            try:
                if with_body:
                    request.state.body = await _json_body(request)
                return JSONResponse(await anyio.to_thread.run_sync(action, request))
            except WorldError as exc:
                return JSONResponse({"error": str(exc)}, status_code=404 if "no world" in str(exc) else 400)

        return endpoint

    def names(request: Request) -> Any:
        return [worlds.summary(worlds.existing(name)) for name in worlds.names()]

    def show(request: Request) -> Any:
        return worlds.export(worlds.existing(request.path_params["name"]))

    def reset(request: Request) -> Any:
        return worlds.summary(worlds.reset(request.path_params["name"]))

    def fork(request: Request) -> Any:
        target = request.query_params.get("to")
        if not target:
            raise WorldError("name the new world: POST .../fork?to=NEW_NAME")
        return worlds.summary(worlds.fork(request.path_params["name"], target))

    def import_world(request: Request) -> Any:
        return worlds.summary(restore(worlds, request.path_params["name"], request.state.body))

    def delete(request: Request) -> Any:
        worlds.delete(request.path_params["name"])
        return {"deleted": request.path_params["name"]}

    return [
        Route(ADMIN_PATH, guarded(names), methods=["GET"]),
        Route(ADMIN_PATH + "/{name}", guarded(show), methods=["GET"]),
        Route(ADMIN_PATH + "/{name}", guarded(delete), methods=["DELETE"]),
        Route(ADMIN_PATH + "/{name}/reset", guarded(reset), methods=["POST"]),
        Route(ADMIN_PATH + "/{name}/fork", guarded(fork), methods=["POST"]),
        Route(ADMIN_PATH + "/{name}/import", guarded(import_world, with_body=True), methods=["POST"]),
    ]


async def _json_body(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        raise WorldError("the request body is not JSON: send an exported world") from None


def is_loopback_client(request: Request) -> bool:
    """Whether the request comes from this machine (the admin routes and the world page without a token)."""
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
