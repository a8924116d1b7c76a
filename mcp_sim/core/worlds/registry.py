"""Every world of a server: created on first use, least recently used dropped past a bound, stored.

The registry caches worlds; the store is the truth. A call holds its world's lock in the store for the whole
call (`calling`), and a cached world the store has since written (another instance sharing it) is read again."""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.core.prompt import Turn
from mcp_sim.core.scenarios import DEFAULT_SCENARIO
from mcp_sim.core.worlds.memory_store import MemoryStore
from mcp_sim.core.worlds.store import WorldStore
from mcp_sim.core.worlds.world import World, WorldError, check_world_name

logger = logging.getLogger(__name__)


class Worlds:
    """Worlds by name. `scenarios` lists the scenarios a world may start from (checked on creation)."""

    def __init__(self, scenarios: Callable[[], set[str]] | set[str] | None = None,
                 default_scenario: str = DEFAULT_SCENARIO, max_worlds: int = defaults.MAX_WORLDS,
                 store: WorldStore | None = None):
        self._scenarios = scenarios if callable(scenarios) else (lambda: set(scenarios or {DEFAULT_SCENARIO}))
        self.default_scenario = default_scenario
        self.max_worlds = max_worlds
        self.store: WorldStore = store or MemoryStore()
        self._worlds: OrderedDict[str, World] = OrderedDict()
        self._lock = threading.Lock()

    @contextmanager
    def calling(self, name: str, scenario: str | None = None) -> Iterator[World]:
        """World `name` (see `get`), its lock held in the store until the block ends: a call runs inside."""
        check_world_name(name)
        with self.store.hold(name):
            yield self.get(name, scenario)

    def get(self, name: str, scenario: str | None = None) -> World:
        """The world called `name` as last stored, created from `scenario` (default: the server's) if it does
        not exist. Hold its lock (`calling`) to change it.

        Asking for an existing world with another scenario is an error: its history began elsewhere."""
        check_world_name(name)
        world = self.find(name)
        if world is None:
            world = World(name, self._check_scenario(scenario or self.default_scenario))
            self.store.save(world)
            self._remember(world)
        elif scenario is not None and scenario != world.scenario:
            raise WorldError(f"world {name!r} runs scenario {world.scenario!r}, not {scenario!r}: pick "
                             "another world name for that scenario, or reset this one")
        return world

    def _check_scenario(self, scenario: str) -> str:
        check_world_name(scenario, "scenario")
        known = self._scenarios()
        if scenario not in known:
            raise WorldError(f"unknown scenario {scenario!r}; the specs define: {', '.join(sorted(known))}")
        return scenario

    def _remember(self, world: World) -> None:
        with self._lock:
            self._worlds[world.name] = world
            self._worlds.move_to_end(world.name)
            evicted = []
            while len(self._worlds) > self.max_worlds:
                evicted.append(self._worlds.popitem(last=False)[0])
        for name in evicted:
            if self.store.shared:  # other instances may use it: only this cache lets go of it
                continue
            self.store.delete(name)
            logger.warning("more than %d worlds (--max-worlds): dropped the least recently used one, %r",
                           self.max_worlds, name)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._worlds.pop(name, None)

    def record(self, world: World, source: str, turn: Turn) -> None:
        """Add an answered call to the world's history; stored before the result is sent, in one transaction
        with the source's live data as the call left it."""
        world.turns.setdefault(source, []).append(turn)
        try:
            self.store.append(world, source, turn)
        except Exception:
            self._forget(world.name)  # the cached copy holds what was not stored: read the store again
            raise

    def leave_out_oldest(self, world: World, source: str, count: int) -> None:
        """The oldest `count` prompt turns of `source` no longer fit the context: leave them out of prompts
        from now on (the history keeps them, for export)."""
        world.dropped[source] = world.dropped.get(source, 0) + count
        self._stored(world)

    def reset(self, name: str) -> World:
        """Empty a world's history, keeping its scenario."""
        with self.store.hold(name):
            world = self.existing(name)
            world.turns.clear()
            world.dropped.clear()
            world.live.clear()
            world.calls = 0
            world.forked_from = None
            self._stored(world)
        return world

    def _stored(self, world: World) -> None:
        try:
            self.store.save(world)
        except Exception:
            self._forget(world.name)
            raise

    def fork(self, name: str, new_name: str) -> World:
        """A new world with a copy of `name`'s scenario and history, diverging from here on."""
        check_world_name(new_name)
        with ExitStack() as held:
            for locked in sorted({name, new_name}):  # in one order everywhere: two forks never wait on each other
                held.enter_context(self.store.hold(locked))
            source = self.existing(name)
            if self.find(new_name) is not None:
                raise WorldError(f"world {new_name!r} exists already: fork to a new name, or reset it first")
            fork = World(new_name, source.scenario, turns=copy.deepcopy(source.turns), dropped=dict(source.dropped),
                         calls=source.calls, forked_from=source.name,
                         live={name: live.copy() for name, live in source.live.items()})
            self.store.save(fork)
            self._remember(fork)
        return fork

    def delete(self, name: str) -> None:
        with self.store.hold(name):
            self.existing(name)
            self._forget(name)
            self.store.delete(name)

    def find(self, name: str) -> World | None:
        """World `name` as last stored, or None."""
        with self._lock:
            world = self._worlds.get(name)
        if world is not None and self.store.shared and self.store.version(name) != world.version:
            self._forget(name)
            world = None  # written by another instance since (or deleted there)
        if world is None:
            world = self.store.load(name)
        if world is not None:
            self._remember(world)
        return world

    def existing(self, name: str) -> World:
        check_world_name(name)
        world = self.find(name)
        if world is None:
            raise WorldError(f"no world named {name!r}; known worlds: {', '.join(self.names()) or 'none'}")
        return world

    def names(self) -> list[str]:
        stored = self.store.names()
        if self.store.shared:
            return stored
        with self._lock:
            return list(dict.fromkeys([*stored, *self._worlds]))

    def summary(self, world: World) -> dict[str, Any]:
        return {"name": world.name, "scenario": world.scenario, "calls": world.calls, "turns": world.all_turns(),
                "left_out_of_prompts": sum(world.dropped.values()), "forked_from": world.forked_from,
                "created": world.created}

    def export(self, world: World) -> dict[str, Any]:
        """The world as data: its summary, every call answered in it and its live data, per spec file."""
        history = {source: [{"action": turn.action, "observation": turn.observation} for turn in turns]
                   for source, turns in world.turns.items()}
        state = {source: live.to_json() for source, live in world.live.items()}
        return {**self.summary(world), "history": history, "state": state}

    def close(self) -> None:
        self.store.close()
