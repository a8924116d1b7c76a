"""Live updates: one SSE stream per open page, an event whenever the store says what the page shows changed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio.to_thread
from sse_starlette import EventSourceResponse

from mcp_sim.base import defaults
from mcp_sim.serving.ui.site import Site

# Seconds between comments on a quiet stream, so that proxies and browsers keep it open.
PING_S = 15


def change_events(site: Site, world: str | None, poll_s: float = defaults.UI_POLL_S) -> EventSourceResponse:
    """`changed` events (data: the new signature) for the page of WORLD (None: the list of worlds), the first
    at once. The store is asked, not this process: with a shared store the page sees every instance's calls."""

    async def changes() -> AsyncIterator[dict[str, str]]:
        last = None
        while True:
            signature = await anyio.to_thread.run_sync(site.signature, world)
            if signature != last:
                last = signature
                yield {"event": "changed", "data": signature}
            await anyio.sleep(poll_s)

    return EventSourceResponse(changes(), ping=PING_S)
