"""The memory store (`memory:`): worlds live as long as the server process, in its cache of worlds."""

from __future__ import annotations

from contextlib import AbstractContextManager

from mcp_sim.core.prompt import Turn
from mcp_sim.core.worlds.store import NamedLocks
from mcp_sim.core.worlds.world import World


class MemoryStore:
    """Keeps nothing beyond the process: the registry's cache is the only copy."""

    url = "memory:"
    shared = False

    def __init__(self) -> None:
        self._locks = NamedLocks()

    def hold(self, name: str) -> AbstractContextManager[None]:
        return self._locks.hold(name)

    def version(self, name: str) -> int | None:
        return None

    def load(self, name: str) -> World | None:
        return None

    def save(self, world: World) -> None:
        world.version += 1

    def append(self, world: World, source: str, turn: Turn) -> None:
        world.version += 1

    def delete(self, name: str) -> None:
        pass

    def names(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


def from_url(url: str) -> MemoryStore:
    return MemoryStore()
