"""A transparent MCP proxy that records every real tool call.

The agent talks to this server; each tools/list and tools/call is forwarded unchanged to the real
server, and each call is appended to a trace file (redacted) before its result goes back, with the
notifications and requests the real server sent during it (mcp_sim.fidelity.record_interactions).
"""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from mcp_sim.fidelity.record_interactions import CallTaps
from mcp_sim.fidelity.record_surface import surface_proxy_handlers
from mcp_sim.fidelity.recorder import Recorder
from mcp_sim.fidelity.upstream import connect
from mcp_sim.rehearsal.traces import Redactor, TraceWriter
from mcp_sim.serving.server import RequestContext, transport_session_id
from mcp_sim.serving.transports import serve_http, serve_stdio

logger = logging.getLogger(__name__)


def wire_result(result: types.CallToolResult) -> dict[str, Any]:
    """The parts of a result a trace keeps, camelCase as on the wire."""
    data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    kept = {"content": data.get("content", [])}
    if "structuredContent" in data:
        kept["structuredContent"] = data["structuredContent"]
    kept["isError"] = bool(data.get("isError", False))
    if data.get("_meta"):  # replayed as recorded (cassettes)
        kept["_meta"] = data["_meta"]
    return kept


def create_proxy(upstream: Client, recorder: Recorder, *, default_session: str,
                 taps: CallTaps | None = None) -> Server:
    """A server that looks like `upstream` (name, instructions, tools) and records each call, with what the
    real server sent the client during it when `taps` are the upstream client's callbacks."""
    info = upstream.server_info
    taps = taps or CallTaps()

    async def list_tools(ctx: RequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        page = await upstream.list_tools(cursor=params.cursor if params else None)
        return types.ListToolsResult(tools=page.tools, next_cursor=page.next_cursor)

    async def call_tool(ctx: RequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        session = transport_session_id(ctx) or default_session
        step = recorder.next_step(session)
        arguments = params.arguments or {}
        started = time.perf_counter()
        with taps.open(ctx) as tap:
            try:
                result = await forward_call(upstream, params, tap.progress)
            except MCPError as exc:
                failure = {"content": [{"type": "text", "text": exc.message}], "isError": True}
                recorder.record(session, step, params.name, arguments, failure,
                                (time.perf_counter() - started) * 1000, protocol_error=exc.code,
                                interactions=tap.events)
                raise
        recorder.record(session, step, params.name, arguments, wire_result(result),
                        (time.perf_counter() - started) * 1000, interactions=tap.events)
        return result

    # Resources, templates and prompts, when the real server has them (mcp_sim.fidelity.record_surface).
    surface = surface_proxy_handlers(upstream, recorder, lambda ctx: transport_session_id(ctx) or default_session)
    return Server(info.name if info else "mcp-sim-record", version=info.version if info else "",
                  instructions=upstream.instructions, on_list_tools=list_tools, on_call_tool=call_tool, **surface)


async def forward_call(upstream: Client, params: types.CallToolRequestParams,
                       progress: ProgressFnT | None = None) -> types.CallToolResult:
    # Sent as a raw request: Client.call_tool would validate structuredContent against the
    # outputSchema and raise, and a transparent proxy must pass even a broken result through.
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=params.name,
                                                                       arguments=params.arguments))
    return await upstream.session.send_request(request, types.CallToolResult, progress_callback=progress)


async def run_proxy(target: StdioServerParameters | str, out: Path, *, redactor: Redactor,
                    replacements: Sequence[tuple[str, str]] = (), session: str | None = None,
                    transport: str = "stdio", host: str = "127.0.0.1", port: int = 8766) -> None:
    """Connect to the real server, then serve the recording proxy until the agent disconnects.

    Leaving `connect` stops a stdio server: its stdin is closed, and after the SDK's grace period its
    whole process group is killed. That takes a moment for a server that does not exit when its stdin
    closes (server-redis), and an agent's client gives this proxy the same grace period before it sends
    SIGTERM: a proxy that died of that signal left the real server running, re-parented. So SIGTERM and
    SIGHUP end the serving, not the process, and the real server is stopped before the proxy exits.
    """
    async with anyio.create_task_group() as watcher:
        serving = anyio.CancelScope()
        watcher.start_soon(_stop_on_signal, serving)
        taps = CallTaps()
        async with connect(target, **taps.callbacks()) as upstream:  # leaving it stops the real server
            name = upstream.server_info.name if upstream.server_info else "unnamed-server"
            writer = TraceWriter(out)
            try:
                proxy = create_proxy(upstream, Recorder(writer, name, redactor, replacements),
                                     default_session=session or uuid.uuid4().hex[:12], taps=taps)
                with serving:
                    if transport == "stdio":
                        await serve_stdio(proxy)
                    else:
                        await serve_http(proxy, host, port)
            finally:
                writer.close()
        watcher.cancel_scope.cancel()


async def _stop_on_signal(serving: anyio.CancelScope) -> None:
    """Until the real server is stopped: a signal ends the serving, and never the process."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for received in signals:
            logger.warning("mcp-sim record: %s received; stopping the real server", signal.Signals(received).name)
            serving.cancel()
