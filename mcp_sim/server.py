"""The MCP layer: advertise the specs' tools and answer tools/call through the simulator.

Kept thin on purpose: every decision about a call lives in `Simulator`; this module only maps it onto
MCP (sessions, progress, cancellation, result shape) and onto the stdio and streamable HTTP transports.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from mcp_sim import __version__
from mcp_sim.errors import BusyError, McpSimError
from mcp_sim.scheduler import FairScheduler
from mcp_sim.simulator import META_KEY, SimulationResult, Simulator, UnknownToolError

logger = logging.getLogger(__name__)

# A client may name its session explicitly in the request's _meta; this is the only way to keep a
# history on the stateless 2026-07-28 protocol over HTTP, where no session id exists.
SESSION_META_KEY = "mcp-sim/session"
INSTRUCTIONS = ("Every tool of this server is SIMULATED by a language world model: nothing is executed and "
                "no real system is touched. Results carry _meta['mcp-sim/simulation'].simulated = true.")
PROGRESS_INTERVAL_S = 0.25


def create_server(simulator: Simulator, *, name: str = "mcp-sim", default_session: str | None = None,
                  scheduler: FairScheduler | None = None) -> Server:
    """An MCP server over `simulator`.

    `default_session` names the session for calls that carry no session identity (stdio serves one
    client, so it passes "stdio"); without it each such call is a session of its own. `scheduler` admits
    calls to the model fairly across sessions (default: one slot, 64 waiting).
    """
    scheduler = scheduler or FairScheduler()
    tools = [types.Tool.model_validate(tool.definition()) for tool in simulator.catalog.tools.values()]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        session_id = _session_id(ctx, default_session)
        try:
            simulator.tool(params.name)
        except UnknownToolError as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        try:
            async with scheduler.slot(session_id):
                result = await _simulate_off_loop(simulator, ctx, params, session_id)
        except BusyError as exc:
            result = SimulationResult(str(exc), is_error=True, meta={META_KEY: {"simulated": True, "stage": "queue"}})
        return to_call_tool_result(result)

    return Server(name, version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call_tool)


def _session_id(ctx: Any, default_session: str | None) -> str:
    meta = ctx.meta or {}
    explicit = meta.get(SESSION_META_KEY) if isinstance(meta, dict) else getattr(meta, SESSION_META_KEY, None)
    if isinstance(explicit, str) and explicit:
        return f"client:{explicit}"
    # The SDK exposes no public accessor for the connection; its session id is the MCP session.
    connection = getattr(ctx.session, "_connection", None)
    transport_session = getattr(connection, "session_id", None)
    if transport_session:
        return f"http:{transport_session}"
    return default_session or f"call:{uuid.uuid4().hex}"


async def _simulate_off_loop(simulator: Simulator, ctx: Any, params: types.CallToolRequestParams,
                             session_id: str) -> SimulationResult:
    """Run the blocking model call in a worker thread; report progress; stop decoding when cancelled."""
    cancel = threading.Event()
    last_report = [0.0]

    def on_progress(tokens: int, budget: int) -> None:
        now = time.monotonic()
        if now - last_report[0] < PROGRESS_INTERVAL_S:
            return
        last_report[0] = now
        try:
            anyio.from_thread.run(ctx.session.report_progress, float(tokens), float(budget),
                                  f"simulating {params.name}: {tokens} tokens")
        except Exception:  # progress is best effort; never fail a call for it
            logger.debug("progress report failed", exc_info=True)

    def run() -> SimulationResult:
        try:
            return simulator.simulate(params.name, params.arguments, session_id,
                                      on_progress=on_progress, cancel=cancel)
        except McpSimError as exc:
            logger.error("simulation of %s failed: %s", params.name, exc)
            return SimulationResult(f"Simulation failed: {exc}", is_error=True,
                                    meta={META_KEY: {"simulated": True, "stage": "engine"}})

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise


def to_call_tool_result(result: SimulationResult) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)],
                                structured_content=result.structured, is_error=result.is_error,
                                _meta=result.meta)
