"""The world page's routes, under /ui beside the admin routes and behind the same guards: the bearer token (or
the page's cookie, see http_guard.UI_COOKIE), Host/Origin, loopback unless the token is required. The page only
reads worlds and forks, resets or deletes them (through the Worlds registry, as the admin routes do); it never
calls a tool."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import anyio.to_thread
import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from mcp_sim.core.worlds import WorldError
from mcp_sim.serving.admin import is_loopback_client
from mcp_sim.serving.http_guard import UI_COOKIE, UI_PATH
from mcp_sim.serving.ui.events import change_events
from mcp_sim.serving.ui.site import Site
from mcp_sim.serving.ui.view import cell_text

Handler = Callable[[Request], Awaitable[Response]]
# The page's own files, served from the package: the page works offline.
STATIC_FILES = {"htmx.min.js": "text/javascript", "page.js": "text/javascript", "page.css": "text/css",
                "htmx.LICENSE.txt": "text/plain"}


def ui_routes(site: Site, remote_allowed: bool = False) -> list[Route]:
    templates = _templates()

    def guarded(handler: Handler, changes: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            if not remote_allowed and not is_loopback_client(request):
                return _refusal("The world page answers loopback clients only.", 403)
            # A header a cross-site form cannot send (and fetch cannot without CORS, which nothing here allows):
            # another site's page cannot make a browser change a world.
            if changes and request.headers.get("hx-request") != "true":
                return _refusal("World operations come from the page's own buttons.", 403)
            try:
                return await handler(request)
            except WorldError as exc:
                return _refusal(str(exc), 404 if "no world" in str(exc) else 400)

        return endpoint

    def page(template: str, **context: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(template).render(ui=UI_PATH, **context))

    async def worlds_page(request: Request) -> Response:
        if "token" in request.query_params:  # the middleware accepted it: keep it, and out of the address bar
            response = RedirectResponse(UI_PATH, status_code=303)
            response.set_cookie(UI_COOKIE, request.query_params["token"], httponly=True, samesite="strict",
                                path=UI_PATH)
            return response
        return page("worlds.html", worlds=await anyio.to_thread.run_sync(site.world_list),
                    signature=await anyio.to_thread.run_sync(site.signature, None))

    async def worlds_fragment(request: Request) -> Response:
        return page("_worlds.html", worlds=await anyio.to_thread.run_sync(site.world_list))

    def world_context(request: Request) -> dict[str, Any]:
        at = request.query_params.get("at")
        return site.world_page(request.path_params["name"], int(at) if at and at.isdigit() else None,
                               request.query_params.get("side") == "before")

    async def world_page(request: Request) -> Response:
        return page("world.html", **await anyio.to_thread.run_sync(world_context, request))

    async def world_panel(request: Request) -> Response:
        return page("_panel.html", **await anyio.to_thread.run_sync(world_context, request))

    async def world_json(request: Request) -> Response:
        return JSONResponse(_as_json(await anyio.to_thread.run_sync(world_context, request)))

    async def events(request: Request) -> Response:
        return change_events(site, request.query_params.get("world") or None)

    async def export(request: Request) -> Response:
        name = request.path_params["name"]
        exported = await anyio.to_thread.run_sync(lambda: site.worlds.export(site.worlds.existing(name)))
        return Response(json.dumps(exported, indent=2, ensure_ascii=False), media_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="world-{name}.json"'})

    async def reset(request: Request) -> Response:
        name = request.path_params["name"]
        await anyio.to_thread.run_sync(site.worlds.reset, name)
        return _go_to(f"{UI_PATH}/worlds/{name}")

    async def fork(request: Request) -> Response:
        target = (request.headers.get("hx-prompt") or "").strip()
        if not target:
            raise WorldError("name the new world")
        await anyio.to_thread.run_sync(site.worlds.fork, request.path_params["name"], target)
        return _go_to(f"{UI_PATH}/worlds/{target}")

    async def delete(request: Request) -> Response:
        await anyio.to_thread.run_sync(site.worlds.delete, request.path_params["name"])
        return _go_to(UI_PATH)

    async def static(request: Request) -> Response:
        name = request.path_params["file"]
        if name not in STATIC_FILES:
            return Response("not found", status_code=404)
        body = resources.files("mcp_sim.serving.ui").joinpath("static").joinpath(name).read_bytes()
        return Response(body, media_type=STATIC_FILES[name], headers={"Cache-Control": "max-age=3600"})

    world = UI_PATH + "/worlds/{name}"
    return [
        Route(UI_PATH, guarded(worlds_page), methods=["GET"]),
        Route(UI_PATH + "/worlds", guarded(worlds_fragment), methods=["GET"]),
        Route(UI_PATH + "/events", guarded(events), methods=["GET"]),
        Route(UI_PATH + "/static/{file}", guarded(static), methods=["GET"]),
        Route(world, guarded(world_page), methods=["GET"]),
        Route(world + "/panel", guarded(world_panel), methods=["GET"]),
        Route(world + "/view.json", guarded(world_json), methods=["GET"]),
        Route(world + "/export", guarded(export), methods=["GET"]),
        Route(world + "/reset", guarded(reset, changes=True), methods=["POST"]),
        Route(world + "/fork", guarded(fork, changes=True), methods=["POST"]),
        Route(world + "/delete", guarded(delete, changes=True), methods=["POST"]),
    ]


def _templates() -> jinja2.Environment:
    environment = jinja2.Environment(loader=jinja2.PackageLoader("mcp_sim.serving.ui", "templates"),
                                     autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["cell"] = cell_text
    environment.filters["pretty"] = _pretty
    return environment


def _pretty(text: str) -> str:
    """An answer as indented JSON when it is JSON, else as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _go_to(address: str) -> Response:
    return Response(status_code=204, headers={"HX-Redirect": address})


def _refusal(message: str, status: int) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def _as_json(context: dict[str, Any]) -> dict[str, Any]:
    """The world page's data, for scripts and tests (the page and this answer come from one view)."""
    ledger = context["ledger"]
    return {
        "world": context["world"], "at": context["at"], "before": context["before"], "drift": context["drift"],
        "calls": [{"number": c.number, "source_file": c.source_file, "tool": c.tool, "arguments": c.arguments,
                   "answer": c.answer, "is_error": c.is_error,
                   "source": c.details.source if c.details else None,
                   "latency_ms": c.details.latency_ms if c.details else None,
                   "faults": list(c.details.faults) if c.details else []} for c in context["calls"]],
        "tables": [{"source_file": t.source_file, "collection": t.collection, "columns": t.columns,
                    "rows": [{"key": r.key, "status": r.status, "cells": r.cells, "changed": sorted(r.changed)}
                             for r in t.rows]} for t in context["tables"]],
        "ledger": ledger if isinstance(ledger, str) else [entry.model_dump(mode="json") for entry in ledger],
    }
