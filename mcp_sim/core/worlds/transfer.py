"""A world exported as data and imported back: `mcp-sim worlds export` and `worlds import` are inverses."""

from __future__ import annotations

from typing import Any

from mcp_sim.core.prompt import Turn
from mcp_sim.core.worlds.registry import Worlds
from mcp_sim.core.worlds.world import World, WorldError
from mcp_sim.state.live import LiveData


def restore(worlds: Worlds, name: str, exported: Any) -> World:
    """World NAME with the scenario and history of EXPORTED (what `Worlds.export` gives). The world must be
    new or empty: an import never mixes two histories."""
    scenario, history, calls = _read(exported)
    live = _read_state(exported)
    with worlds.store.hold(name):
        existing = worlds.find(name)
        if existing is not None and existing.all_turns():
            raise WorldError(f"world {name!r} exists already and has a history: import under another name "
                             "(--name), or reset or delete it first")
        world = worlds.get(name, scenario)
        for source, turns in history.items():
            for action, observation in turns:
                worlds.record(world, source, Turn(action, observation))
        world.calls = calls
        world.live = live
        world.forked_from = exported.get("forked_from") if isinstance(exported.get("forked_from"), str) else None
        worlds.store.save(world)
    return world


def _read_state(exported: Any) -> dict[str, LiveData]:
    """The live data of each spec file (x-sim.state), as export wrote it; none in an older export."""
    state = exported.get("state", {})
    if not isinstance(state, dict):
        raise WorldError("state: expected an object of spec file -> {data, absent}")
    try:
        return {str(source): LiveData.from_json(live) for source, live in state.items()}
    except ValueError as exc:
        raise WorldError(f"state: {exc}") from None


def _read(exported: Any) -> tuple[str, dict[str, list[tuple[str, str]]], int]:
    if not isinstance(exported, dict) or not isinstance(exported.get("history"), dict):
        raise WorldError("not an exported world: expected an object with 'scenario' and 'history' (as "
                         "`mcp-sim worlds export` writes it)")
    scenario = exported.get("scenario")
    if not isinstance(scenario, str):
        raise WorldError("the exported world has no 'scenario' string")
    history: dict[str, list[tuple[str, str]]] = {}
    for source, turns in exported["history"].items():
        if not isinstance(turns, list):
            raise WorldError(f"history/{source}: expected a list of turns")
        history[source] = []
        for number, turn in enumerate(turns):
            if not (isinstance(turn, dict) and isinstance(turn.get("action"), str)
                    and isinstance(turn.get("observation"), str)):
                raise WorldError(f"history/{source}/{number}: expected {{'action': text, 'observation': text}}")
            history[source].append((turn["action"], turn["observation"]))
    total = sum(len(turns) for turns in history.values())
    calls = exported.get("calls", total)
    return scenario, history, calls if isinstance(calls, int) and calls >= 0 else total
