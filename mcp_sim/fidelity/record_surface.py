"""The recording proxy's resources and prompts: lists forwarded as they are, each resources/read and
prompts/get forwarded and recorded like a tool call (its `kind` says which)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.fidelity.recorder import Recorder
from mcp_sim.rehearsal.traces import PROMPT_GET, RESOURCE_READ
from mcp_sim.serving.server import RequestContext

SessionOf = Callable[[RequestContext], str]


def surface_proxy_handlers(upstream: Client, recorder: Recorder, session_of: SessionOf) -> dict[str, Any]:
    """The low-level Server's `on_*` handlers for what the real server advertises besides tools."""
    capabilities = upstream.server_capabilities
    handlers: dict[str, Any] = {}
    if capabilities.resources is not None:
        handlers.update(_resource_handlers(upstream, _Recording(recorder, session_of)))
    if capabilities.prompts is not None:
        handlers.update(_prompt_handlers(upstream, _Recording(recorder, session_of)))
    return handlers


class _Recording:
    """Runs one forwarded request and records it, its JSON-RPC error included, before answering."""

    def __init__(self, recorder: Recorder, session_of: SessionOf):
        self.recorder = recorder
        self.session_of = session_of

    async def run(self, ctx: RequestContext, kind: str, name: str, arguments: dict[str, Any],
                  forward: Callable[[], Awaitable[types.Result]]) -> Any:
        session = self.session_of(ctx)
        step = self.recorder.next_step(session)
        started = time.perf_counter()
        try:
            result = await forward()
        except MCPError as exc:
            failure = {"content": [{"type": "text", "text": exc.message}], "isError": True}
            self.recorder.record(session, step, name, arguments, failure, _ms(started), exc.code, kind)
            raise
        kept = result.model_dump(by_alias=True, exclude_none=True, mode="json", exclude={"meta", "result_type"})
        self.recorder.record(session, step, name, arguments, kept, _ms(started), kind=kind)
        return result


def _resource_handlers(upstream: Client, recording: _Recording) -> dict[str, Any]:
    async def list_resources(ctx: RequestContext,
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return await upstream.list_resources(cursor=params.cursor if params else None, cache_mode="bypass")

    async def list_templates(ctx: RequestContext,
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return await upstream.list_resource_templates(cursor=params.cursor if params else None, cache_mode="bypass")

    async def read_resource(ctx: RequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        return await recording.run(ctx, RESOURCE_READ, uri, {"uri": uri},
                                   lambda: upstream.read_resource(uri, cache_mode="bypass"))

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read_resource}


def _prompt_handlers(upstream: Client, recording: _Recording) -> dict[str, Any]:
    async def list_prompts(ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await upstream.list_prompts(cursor=params.cursor if params else None, cache_mode="bypass")

    async def get_prompt(ctx: RequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        arguments = params.arguments or {}
        return await recording.run(ctx, PROMPT_GET, params.name, dict(arguments),
                                   lambda: upstream.get_prompt(params.name, arguments))

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
