"""The streamable HTTP transport's event store: what lets a client resume an SSE stream (SEP-1699).

With a store, the SDK opens every POST's SSE stream with a priming event (an id and empty data, and the
`retry` interval a client waits before reconnecting) and gives each message an id; a client whose stream
broke reconnects with `Last-Event-ID` and is sent what it missed. Kept in memory, the newest
`defaults.SSE_EVENTS_KEPT` events, so a long-running server holds a bounded amount.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

from mcp_sim.base import defaults


class MemoryEventStore(EventStore):
    """The newest `limit` events of every stream, oldest dropped first."""

    def __init__(self, limit: int = defaults.SSE_EVENTS_KEPT):
        self.limit = limit
        self._events: OrderedDict[EventId, tuple[StreamId, JSONRPCMessage | None]] = OrderedDict()
        self._ids = itertools.count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = str(next(self._ids))
        self._events[event_id] = (stream_id, message)
        while len(self._events) > self.limit:
            self._events.popitem(last=False)
        return event_id

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the events of LAST_EVENT_ID's stream that came after it; None when it is unknown (or dropped)."""
        if last_event_id not in self._events:
            return None
        stream_id = self._events[last_event_id][0]
        later = False
        for event_id, (stream, message) in list(self._events.items()):
            if event_id == last_event_id:
                later = True
            elif later and stream == stream_id and message is not None:  # priming events carry nothing
                await send_callback(EventMessage(message, event_id))
        return stream_id
