"""The MCP layer: advertise the specs' tools and answer tools/call through the simulator.

Kept thin on purpose: every decision about a call lives in `Simulator` and the world rules in
`mcp_sim.core.worlds`; this module maps them onto MCP (which world a request names, progress, cancellation,
result shape, the optional `sim://world` resource) and onto the stdio and streamable HTTP transports.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from mcp_sim import __version__
from mcp_sim.base import defaults
from mcp_sim.base.content import content_text
from mcp_sim.core.call_interactions import (
    ClientRefused,
    InputRequired,
    ask_client,
    close_stream,
    connection_of,
    replay_interactions,
    send_notifications,
    shaped,
)
from mcp_sim.core.capabilities import advertised
from mcp_sim.core.simulator import SimulationResult, Simulator, UnknownToolError
from mcp_sim.core.specs import ToolSpec
from mcp_sim.core.worlds.routing import choose_world
from mcp_sim.serving.call_path import answer_in_world
from mcp_sim.serving.resource_server import surface_handlers, written_uri
from mcp_sim.serving.scheduler import FairScheduler
from mcp_sim.serving.server_features import AdvertisingServer, Peers, completion_handler, file_features, logging_handler

if TYPE_CHECKING:
    from mcp_sim.serving.warmup import Warmup

logger = logging.getLogger(__name__)
# The agent's request a tool call is answered for, while it is: an answer source that asks a real server
# (shadow) relays that server's sampling, elicitation and notifications to this agent, on this request.
CALLER: ContextVar[Any] = ContextVar("mcp_sim_caller", default=None)

RequestContext = ServerRequestContext[Any, Any]

# A client names its world in the URL (?world=NAME&scenario=S) or in the request's _meta.
WORLD_META_KEY = "mcp-sim/world"
SESSION_META_KEY = "mcp-sim/session"  # the older name of the same key, still honoured
SCENARIO_META_KEY = "mcp-sim/scenario"
INSTRUCTIONS = ("Every tool of this server is SIMULATED by a language world model: nothing is executed and "
                "no real system is touched. Results carry _meta['mcp-sim/simulation'].simulated = true.")


def create_server(simulator: Simulator, *, name: str = "mcp-sim", world_scope: str = "session",
                  scheduler: FairScheduler | None = None, expose_world: bool = False,
                  warmup: Warmup | None = None, peers: Peers | None = None,
                  list_changed: bool = False) -> AdvertisingServer:
    """An MCP server over `simulator`.

    `world_scope` "server" puts every call that names no world into the default world, legacy HTTP sessions
    included. `scheduler` admits calls to the model fairly across worlds (default: one slot, 64 waiting).
    `expose_world` publishes the calling world's scenario and history as the resource `sim://world`.
    `warmup`, while the model loads in the background, holds calls until it is ready.
    `peers` (log levels, subscriptions, connections) outlive the server when `serve --reload` rebuilds it;
    `list_changed` advertises that the lists may change (and the connections hear when they do).
    """
    scheduler = scheduler or FairScheduler()
    tools = [types.Tool.model_validate(tool.definition()) for tool in simulator.catalog.tools.values()]
    peers = peers or Peers()
    levels, subscriptions = peers.levels, peers.subscriptions

    pages = tool_pages(simulator.catalog.tools.values())

    async def list_tools(ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        cursor = params.cursor if params is not None else None
        start = pages.get(cursor or "0")
        if start is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown cursor {cursor!r}: list again from the start")
        end = pages.get(f"end:{start}", len(tools))
        return types.ListToolsResult(tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None)

    async def call_tool(ctx: RequestContext,
                        params: types.CallToolRequestParams) -> types.CallToolResult | types.InputRequiredResult:
        world, scenario = request_world(ctx, world_scope)
        try:
            tool = simulator.tool(params.name)
        except UnknownToolError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        interactions = tool.interactions
        try:
            # Before the answer, as a real tool would: ask the client, then report while "working".
            client = await ask_client(ctx, interactions, params.arguments or {}, params.input_responses,
                                      params.request_state) if interactions.asks_client else None
            await send_notifications(ctx, interactions.notifications, levels)
            if interactions.close_stream:
                await close_stream(ctx)
            caller = CALLER.set(ctx)  # the worker thread that answers inherits it (anyio copies the context)
            try:
                result = await answer_in_world(simulator, tool, params.arguments, world, scenario,
                                               send_progress=ctx.session.report_progress, label=params.name,
                                               scheduler=scheduler, warmup=warmup, client=client)
            finally:
                CALLER.reset(caller)
        except InputRequired as needed:  # stateless: the client answers the requests and calls again
            return needed.result
        except ClientRefused as exc:
            result = simulator.refused(str(exc), "client", world)
        if result.interactions:  # what a recorded call's server sent, or log lines the model wrote
            await replay_interactions(ctx, result.interactions, levels)
        result = shaped(result, interactions)
        if result.observation is not None and not result.is_error:
            await subscriptions.changed(world, tool, lambda uri: written_uri(simulator, uri))
        return to_call_tool_result(result)

    # The specs' resources, templates and prompts, and sim://world (mcp_sim.serving.resource_server).
    def world_of(ctx: RequestContext) -> tuple[str, str | None]:
        return request_world(ctx, world_scope)

    handlers = surface_handlers(simulator, world_of, scheduler, expose_world, warmup)
    # A simulated server has every feature a real one may have, so any client can be rehearsed against it.
    handlers.update(logging_handler(levels),
                    **completion_handler(simulator.catalog,
                                         lambda ctx, name: simulator.known_keys(world_of(ctx)[0], name)),
                    **subscriptions.handlers(world_of))
    # ...unless its specs say which it has (server.capabilities, copied by mirror): mcp_sim.core.capabilities.
    said = advertised(file_features(simulator.catalog), list_changed)
    if list_changed:  # 2026-07-28 clients hear list changes on a subscriptions/listen stream
        handlers["on_subscriptions_listen"] = peers.listen
    with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28; 2025-11-25 clients still use it
        warnings.simplefilter("ignore")
        server = AdvertisingServer(name, version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                                   on_call_tool=call_tool, **said.keep(handlers, world_resource=expose_world))
    server.advertised = said
    server.middleware.append(peers.connections.middleware)
    # Stateless calls carry their earlier answers in requestState: sealed, so a client cannot forge them.
    server.middleware.append(RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=name))
    return server


def tool_pages(specs: Iterable[ToolSpec]) -> dict[str, int]:
    """Pages of tools/list, each at most TOOLS_PAGE_BYTES of definitions (one tool at least): the cursor of a
    page (its first tool's index, "0" first) -> that index, and "end:INDEX" -> where the page ends. A spec of
    a thousand tools lists tens of megabytes; clients cap one message (the Python SDK's SSE reader at 1 MiB)."""
    pages: dict[str, int] = {"0": 0}
    start, size = 0, 0
    for index, spec in enumerate(specs):
        length = len(json.dumps(spec.definition(), ensure_ascii=False))
        if index > start and size + length > defaults.TOOLS_PAGE_BYTES:
            pages[f"end:{start}"] = index
            pages[str(index)] = start = index
            size = 0
        size += length
    return pages


def request_world(ctx: RequestContext, world_scope: str) -> tuple[str, str | None]:
    """The world (and the scenario for a new one) that the request names, or that its transport implies."""
    query = getattr(ctx.request, "query_params", None) or {}
    explicit = _meta_text(ctx, WORLD_META_KEY) or _meta_text(ctx, SESSION_META_KEY) or query.get("world")
    scenario = _meta_text(ctx, SCENARIO_META_KEY) or query.get("scenario")
    return choose_world(explicit, transport_session_id(ctx), world_scope), scenario


def _meta_text(ctx: RequestContext, key: str) -> str | None:
    meta = ctx.meta or {}
    value = meta.get(key) if isinstance(meta, dict) else getattr(meta, key, None)
    return value if isinstance(value, str) and value else None


def transport_session_id(ctx: RequestContext) -> str | None:
    """The `Mcp-Session-Id` of a 2025-11-25 HTTP session, else None (stdio, stateless HTTP)."""
    session_id = getattr(connection_of(ctx), "session_id", None)
    return str(session_id) if session_id else None


def to_call_tool_result(result: SimulationResult) -> types.CallToolResult:
    content: list[types.ContentBlock] = [] if result.no_content else [types.TextContent(type="text", text=result.text)]
    # The blocks as written or recorded, unless a fault rewrote the text they stand for since.
    if result.content is not None and not result.no_content and result.text == content_text(result.content):
        content = [CONTENT_BLOCK.validate_python(block) for block in result.content]
    return types.CallToolResult(content=content,
                                structured_content=result.structured, is_error=result.is_error,
                                _meta={**(result.result_meta or {}), **result.meta})


CONTENT_BLOCK: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)
