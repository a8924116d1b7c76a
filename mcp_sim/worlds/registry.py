"""Every world of a server: created on first use, least recently used dropped past a bound, stored."""

from __future__ import annotations

import copy
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mcp_sim import defaults
from mcp_sim.prompt import Turn
from mcp_sim.scenarios import DEFAULT_SCENARIO
from mcp_sim.worlds.store import MemoryStore, WorldStore
from mcp_sim.worlds.world import World, WorldError, check_world_name

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

    def get(self, name: str, scenario: str | None = None) -> World:
        """The world called `name`, created from `scenario` (default: the server's) if it does not exist.

        Asking for an existing world with another scenario is an error: its history began elsewhere."""
        check_world_name(name)
        with self._lock:
            world = self._worlds.get(name) or self.store.load(name)
            if world is None:
                world = World(name, self._check_scenario(scenario or self.default_scenario))
                self.store.save(world)
            elif scenario is not None and scenario != world.scenario:
                raise WorldError(f"world {name!r} runs scenario {world.scenario!r}, not {scenario!r}: pick "
                                 "another world name for that scenario, or reset this one")
            self._remember(world)
            return world

    def _check_scenario(self, scenario: str) -> str:
        check_world_name(scenario, "scenario")
        known = self._scenarios()
        if scenario not in known:
            raise WorldError(f"unknown scenario {scenario!r}; the specs define: {', '.join(sorted(known))}")
        return scenario

    def _remember(self, world: World) -> None:
        self._worlds[world.name] = world
        self._worlds.move_to_end(world.name)
        while len(self._worlds) > self.max_worlds:
            evicted, _ = self._worlds.popitem(last=False)
            self.store.delete(evicted)
            logger.warning("more than %d worlds (--max-worlds): dropped the least recently used one, %r",
                           self.max_worlds, evicted)

    def record(self, world: World, source: str, turn: Turn) -> None:
        """Add an answered call to the world's history; stored before the result is sent, in one transaction
        with the source's live data as the call left it."""
        world.turns.setdefault(source, []).append(turn)
        self.store.append(world, source, turn)

    def leave_out_oldest(self, world: World, source: str, count: int) -> None:
        """The oldest `count` prompt turns of `source` no longer fit the context: leave them out of prompts
        from now on (the history keeps them, for export)."""
        world.dropped[source] = world.dropped.get(source, 0) + count
        self.store.save(world)

    def reset(self, name: str) -> World:
        """Empty a world's history, keeping its scenario."""
        world = self.existing(name)
        with world.lock:
            world.turns.clear()
            world.dropped.clear()
            world.live.clear()
            world.calls = 0
            world.forked_from = None
            self.store.save(world)
        return world

    def fork(self, name: str, new_name: str) -> World:
        """A new world with a copy of `name`'s scenario and history, diverging from here on."""
        check_world_name(new_name)
        source = self.existing(name)
        with source.lock:
            if self.find(new_name) is not None:
                raise WorldError(f"world {new_name!r} exists already: fork to a new name, or reset it first")
            fork = World(new_name, source.scenario, turns=copy.deepcopy(source.turns), dropped=dict(source.dropped),
                         calls=source.calls, forked_from=source.name,
                         live={name: live.copy() for name, live in source.live.items()})
        self.store.save(fork)
        with self._lock:
            self._remember(fork)
        return fork

    def delete(self, name: str) -> None:
        self.existing(name)
        with self._lock:
            self._worlds.pop(name, None)
            self.store.delete(name)

    def find(self, name: str) -> World | None:
        with self._lock:
            world = self._worlds.get(name) or self.store.load(name)
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
        with self._lock:
            return list(dict.fromkeys([*self.store.names(), *self._worlds]))

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
