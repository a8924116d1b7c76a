"""The MCP handlers for the specs' resources, resource templates and prompts, and the optional `sim://world`.

Prompts, resources with content and template reads a fixture answers are served as written; every other read
is a call in the caller's world, taking the path tools/call takes (mcp_sim.serving.call_path: warm-up, the world's turn,
progress, cancellation, an injected protocol error as that JSON-RPC error). The handlers are there even when
the specs declare none (empty lists): a simulated server has every feature a real one may have.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_sim.core.calls import SimulationResult
from mcp_sim.core.resource_reads import UnknownResourceError, read_target, read_tool
from mcp_sim.core.resources import ResourceSpec, Surface, TemplateSpec, find_prompt, prompt_problem
from mcp_sim.core.simulator import Simulator
from mcp_sim.serving.call_path import answer_in_world
from mcp_sim.serving.scheduler import FairScheduler

if TYPE_CHECKING:
    from mcp_sim.serving.warmup import Warmup

logger = logging.getLogger(__name__)

RequestContext = ServerRequestContext[Any, Any]
# The world (and the scenario for a new one) a request names: mcp_sim.serving.server.request_world.
WorldOf = Callable[[RequestContext], tuple[str, "str | None"]]
WORLD_RESOURCE_URI = "sim://world"
# SEP-2164 (and the SDK's own MCPServer): an unknown resource is invalid params; -32002 is retired.
RESOURCE_NOT_FOUND = types.INVALID_PARAMS


def surface_handlers(simulator: Simulator, world_of: WorldOf, scheduler: FairScheduler,
                     expose_world: bool = False, warmup: Warmup | None = None) -> dict[str, Any]:
    """The `on_*` keyword arguments of the low-level Server for what the specs declare besides tools."""
    surfaces = [spec_set.surface for spec_set in simulator.catalog.spec_sets]
    return {**_resource_handlers(simulator, surfaces, world_of, scheduler, expose_world, warmup),
            **_prompt_handlers(surfaces)}


def written_uri(simulator: Simulator, uri: str) -> bool:
    """Whether the spec writes what URI holds (a resource with content): no call changes it."""
    try:
        target = read_target(simulator.catalog, uri)
    except UnknownResourceError:
        return False
    return isinstance(target, ResourceSpec) and target.has_content


def _resource_handlers(simulator: Simulator, surfaces: list[Surface], world_of: WorldOf,
                       scheduler: FairScheduler, expose_world: bool, warmup: Warmup | None) -> dict[str, Any]:
    resources = [types.Resource.model_validate(r.declared) for s in surfaces for r in s.resources]
    if expose_world:
        resources.append(WORLD_RESOURCE)
    templates = [types.ResourceTemplate.model_validate(t.declared) for s in surfaces for t in s.templates]

    async def list_resources(ctx: RequestContext,
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=resources)

    async def list_templates(ctx: RequestContext,
                             params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(ctx: RequestContext, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if expose_world and uri == WORLD_RESOURCE_URI:
            return _world_contents(simulator, world_of(ctx)[0])
        try:
            target = read_target(simulator.catalog, uri)
        except UnknownResourceError:
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: unknown resource {uri} (this server has "
                           f"{len(resources)} resource(s) and {len(templates)} template(s))", {"uri": uri}) from None
        if isinstance(target, ResourceSpec) and target.has_content:
            return types.ReadResourceResult(contents=[_written_contents(target)])
        written = target.written(uri) if isinstance(target, TemplateSpec) else None
        if written is not None:
            return types.ReadResourceResult(contents=[written])
        world, scenario = world_of(ctx)
        result = await answer_in_world(simulator, read_tool(simulator.catalog, uri), {"uri": uri}, world, scenario,
                                       send_progress=ctx.session.report_progress, label=f"read {uri}",
                                       scheduler=scheduler, warmup=warmup)
        _raise_unless_content(result, uri)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type=target.mime_type, text=result.text)], _meta=result.meta)

    return {"on_list_resources": list_resources, "on_list_resource_templates": list_templates,
            "on_read_resource": read_resource}


def _written_contents(resource: ResourceSpec) -> types.TextResourceContents | types.BlobResourceContents:
    if resource.blob is not None:
        return types.BlobResourceContents(uri=resource.uri, mime_type=resource.mime_type, blob=resource.blob)
    return types.TextResourceContents(uri=resource.uri, mime_type=resource.mime_type, text=resource.text or "")


def _raise_unless_content(result: SimulationResult, uri: str) -> None:
    """A read has no isError result: an answer that is no content is a JSON-RPC error, a simulated failure (or
    an unknown world) as not found, the rest (a full queue, a failed engine) as internal errors."""
    if not result.is_error:
        return
    simulation = result.simulation
    code = RESOURCE_NOT_FOUND if simulation.simulated_error or simulation.stage == "world" else types.INTERNAL_ERROR
    raise MCPError(code, result.text, {"uri": uri, **result.meta})


def _prompt_handlers(surfaces: list[Surface]) -> dict[str, Any]:
    prompts = [types.Prompt.model_validate(p.declared) for s in surfaces for p in s.prompts]

    async def list_prompts(ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(ctx: RequestContext, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = find_prompt(surfaces, params.name)
        if prompt is None:
            known = ", ".join(p.name for p in prompts)
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt {params.name!r}. This server has: {known}")
        arguments = params.arguments or {}
        problem = prompt_problem(prompt, arguments)
        if problem:
            raise MCPError(types.INVALID_PARAMS, problem)
        messages = [types.PromptMessage.model_validate(m) for m in prompt.render(arguments)]
        return types.GetPromptResult(description=prompt.declared.get("description"), messages=messages)

    return {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}


WORLD_RESOURCE = types.Resource(uri=WORLD_RESOURCE_URI, name="world", title="The simulated world",
                                description="This world's scenario and every call answered in it (simulated).",
                                mime_type="application/json")


def _world_contents(simulator: Simulator, name: str) -> types.ReadResourceResult:
    """`sim://world`: what the simulator believes about the caller's world, for a developer to read."""
    world = simulator.worlds.find(name)
    state = simulator.worlds.export(world) if world else {"name": name, "calls": 0, "history": {}}
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=WORLD_RESOURCE_URI, mime_type="application/json", text=json.dumps(state, ensure_ascii=False))])
