"""Where worlds are kept between calls: the interface every store implements (see stores.py for the list).

A store owns what must hold across every process that shares it: the per-world lock a call holds from start
to end, the order (sequence numbers) of a world's turns, and a version per world that tells a process whether
its cached copy is still the latest. Memory and SQLite belong to one process; Postgres is shared by many.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from mcp_sim.core.prompt import Turn
from mcp_sim.core.worlds.world import World, WorldError


class StoreError(WorldError):
    """The world store cannot be used (unreachable, damaged, of another program): the message names it."""


class WorldStore(Protocol):
    # The store as a URL (memory:, sqlite:///DIR, postgresql://...), for messages; without a password.
    url: str
    # Whether other processes write the same worlds: a cached world is checked against `version` before use.
    shared: bool

    def hold(self, name: str) -> AbstractContextManager[None]:
        """World NAME's lock, held for a whole call: one call at a time per world across every process that
        shares the store, so call N sees calls 1..N-1. Writes of NAME made while holding it go under it."""
        ...

    def version(self, name: str) -> int | None:
        """How many times world NAME was written (None: no such world); a cached copy of another version is
        stale."""
        ...

    def load(self, name: str) -> World | None: ...

    def save(self, world: World) -> None:
        """Write the whole world (header, every turn, live data); sets `world.version` to the new version."""
        ...

    def append(self, world: World, source: str, turn: Turn) -> None:
        """Write one answered call (the store numbers it after the source's last turn), the world's header and
        the live data of SOURCE as the call left it, in one transaction, durably, before it is reported as
        answered; sets `world.version`."""
        ...

    def delete(self, name: str) -> None: ...

    def names(self) -> list[str]:
        """Every stored world, least recently used first."""
        ...

    def close(self) -> None: ...


class NamedLocks:
    """One first-come-first-served lock per name: a world's calls are answered in the order they arrived.
    Made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._queues: dict[str, deque[threading.Event]] = {}

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        turn = threading.Event()
        with self._guard:
            queue = self._queues.setdefault(name, deque())
            queue.append(turn)
            if len(queue) == 1:
                turn.set()
        try:
            turn.wait()
            yield
        finally:
            with self._guard:
                first = queue[0] is turn
                queue.remove(turn)
                if not queue:
                    del self._queues[name]
                elif first:
                    queue[0].set()
