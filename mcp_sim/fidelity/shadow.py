"""The real side of `mcp-sim shadow`: a live connection the read-only calls go to (each recorded when asked),
or a recording of one, so the same rehearsal replays offline.

What the real server sends during a call (sampling, elicitation and roots requests, log messages, progress)
is relayed to the agent whose call it is, as `record` relays it (mcp_sim.fidelity.record_interactions), and
kept in the trace; its resources/updated reach the agents subscribed to the resource.

Both are `RealCall`s (mcp_sim.rehearsal.shadow): the answer source calls them from the worker thread a
call is answered on; the live connection's client lives on the event loop, so it is reached from there.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.from_thread
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.resource_reads import READ_TOOL
from mcp_sim.fidelity.record import forward_call, wire_result
from mcp_sim.fidelity.record_interactions import CallTaps
from mcp_sim.fidelity.recorder import Recorder
from mcp_sim.rehearsal.cassettes import Cassette
from mcp_sim.serving.server import CALLER
from mcp_sim.serving.server_features import Subscriptions


class RealServer:
    """Calls the real server over CLIENT (bound once connected), appending each call to RECORDER if given."""

    def __init__(self, recorder: Recorder | None = None, session: str = "shadow"):
        self.client: Client | None = None
        self.recorder = recorder
        self.session = session
        self.taps = CallTaps()  # the agents' calls in flight here, for what the real server sends during them

    def callbacks(self, subscriptions: Subscriptions | None = None) -> dict[str, Any]:
        """The real server's Client keyword arguments: it declares sampling, elicitation and roots, relays them
        to the agent of the call in flight, and hands resources/updated to SUBSCRIPTIONS."""
        relayed = self.taps.callbacks()
        notified = relayed["message_handler"]

        async def message_handler(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification) and subscriptions is not None:
                await subscriptions.updated(str(message.params.uri))
                return
            await notified(message)

        return {**relayed, "message_handler": message_handler}

    async def subscribe(self, uri: str) -> None:
        await self._connected().subscribe_resource(uri)

    async def unsubscribe(self, uri: str) -> None:
        await self._connected().unsubscribe_resource(uri)

    def _connected(self) -> Client:
        if self.client is None:
            raise McpSimError("the real server is not connected yet")
        return self.client

    def __call__(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        client = self._connected()
        started = time.perf_counter()
        events: list[dict[str, Any]] = []
        try:
            wire = anyio.from_thread.run(self._ask, client, tool, arguments, CALLER.get(), events)
        except MCPError as exc:  # the real server refused the request: the agent sees its words
            wire = {"content": [{"type": "text", "text": exc.message}], "isError": True}
        if self.recorder is not None:
            step = self.recorder.next_step(self.session)
            self.recorder.record(self.session, step, tool, arguments, wire, (time.perf_counter() - started) * 1000,
                                 interactions=events or None)
        return wire

    async def _ask(self, client: Client, tool: str, arguments: dict[str, Any], caller: Any,
                   events: list[dict[str, Any]]) -> dict[str, Any]:
        if tool == READ_TOOL:
            read = await client.read_resource(str(arguments.get("uri", "")))
            return {"content": [{"type": "text", "text": _resource_text(read)}], "isError": False}
        params = types.CallToolRequestParams(name=tool, arguments=arguments)
        if caller is None:  # not an agent's tool call (a read before a simulated write): nothing to relay to
            return wire_result(await forward_call(client, params))
        with self.taps.open(caller) as tap:
            try:
                return wire_result(await forward_call(client, params, tap.progress))
            finally:
                events.extend(tap.events)


class RecordedReads:
    """The real answers of an earlier shadow rehearsal (`shadow --record`), for the same rehearsal offline: a
    read it never made is a failure that says so, never a guess."""

    def __init__(self, traces: Sequence[str | Path]):
        self.cassette = Cassette.load(traces)
        self.traces = [str(path) for path in traces]

    def __call__(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        recorded = self.cassette.recorded(tool, arguments)
        if not recorded:
            text = (f"Replay miss: the real server was not asked {tool} with these arguments in "
                    f"{', '.join(self.traces)}; run the rehearsal against the real server with --record first")
            return {"content": [{"type": "text", "text": text}], "isError": True}
        return recorded[0].result


def _resource_text(read: types.ReadResourceResult) -> str:
    parts = []
    for item in read.contents:
        text = getattr(item, "text", None)
        parts.append(text if isinstance(text, str) else f"[binary {getattr(item, 'mime_type', None) or 'data'}]")
    return "\n".join(parts)
