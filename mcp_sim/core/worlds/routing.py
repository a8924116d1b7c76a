"""Which world answers a call: pure rules over what the request carries, so every client keeps a world.

1. A world the client names: `?world=NAME` in the server URL (works with every client that takes a URL)
   or `_meta["mcp-sim/world"]` on the request (`mcp-sim/session` is the older name of the same key).
2. Otherwise a 2025-11-25 HTTP session keeps a world of its own (one per `Mcp-Session-Id`), unless the
   server runs with `--world-scope server`.
3. Otherwise the server's default world: stateless 2026-07-28 requests share it, as the clients of a real
   backend share its state; on stdio it is the one client's world.
"""

from __future__ import annotations

from mcp_sim.core.worlds.world import DEFAULT_WORLD

SCOPES = ("session", "server")


def choose_world(explicit: str | None, transport_session: str | None, scope: str = "session") -> str:
    if explicit:
        return explicit
    if transport_session and scope == "session":
        return f"session:{transport_session}"
    return DEFAULT_WORLD
