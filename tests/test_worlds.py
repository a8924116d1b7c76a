"""Worlds without a model: naming, scenarios, reset, fork, the LRU bound and the SQLite store."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from mcp_sim.core.prompt import Turn
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.core.worlds import WorldError, Worlds
from mcp_sim.core.worlds.routing import choose_world
from mcp_sim.core.worlds.sqlite_store import SqliteStore
from mcp_sim.core.worlds.stores import open_store
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

OPS = SPECS / "ops.yaml"
STATUS = json.dumps({"service": "api", "state": "running", "version": "1", "uptime_s": 5, "healthy": True})


def test_which_world_answers_a_call() -> None:
    assert choose_world("mine", "abc", "session") == "mine"  # a named world always wins
    assert choose_world(None, "abc", "session") == "session:abc"  # a legacy HTTP session keeps its own
    assert choose_world(None, "abc", "server") == "default"  # ...unless the server shares one world
    assert choose_world(None, None, "session") == "default"  # stateless requests and stdio: the default


@pytest.mark.parametrize("name", ["", "x" * 129, "bad name", "tab\there", "nul\x00", "../up", "ünï"])
def test_bad_world_names_are_refused_with_the_rule(name: str) -> None:
    with pytest.raises(WorldError, match="name"):
        Worlds().get(name)


def test_a_scenario_changes_the_system_prompt_and_unknown_ones_are_refused() -> None:
    catalog = load_catalog([OPS])
    engine = ScriptedEngine(STATUS, STATUS)
    sim = Simulator(catalog, engine, SimOptions(attempts=1))
    calm = sim.simulate("get_service_status", {"service": "postgres"}, world="calm")
    down = sim.simulate("get_service_status", {"service": "postgres"}, world="down", scenario="postgres-down")
    calm_system, down_system = (request.messages[0].content for request in engine.requests)
    assert "postgres-down" not in calm_system and 'Scenario "postgres-down"' in down_system
    assert '"postgres": {"state": "stopped"' in down_system and '"postgres": {"state": "running"' in calm_system
    assert calm.meta[META_KEY]["scenario"] == "default" and down.meta[META_KEY]["scenario"] == "postgres-down"
    unknown = sim.simulate("get_service_status", {"service": "api"}, world="w", scenario="meteor-strike")
    assert unknown.is_error and "unknown scenario 'meteor-strike'" in unknown.text and "postgres-down" in unknown.text
    switched = sim.simulate("get_service_status", {"service": "api"}, world="calm", scenario="postgres-down")
    assert switched.is_error and "runs scenario 'default'" in switched.text
    assert len(engine.requests) == 2  # refused calls never reached the model


def test_reset_empties_and_fork_copies_then_diverges() -> None:
    worlds = Worlds()
    origin = worlds.get("origin")
    worlds.record(origin, "ops.yaml", Turn("call-1", "answer-1"))
    fork = worlds.fork("origin", "copy")
    assert fork.history("ops.yaml") == origin.history("ops.yaml") and fork.forked_from == "origin"
    worlds.record(fork, "ops.yaml", Turn("call-2", "only in the copy"))
    assert len(origin.history("ops.yaml")) == 1 and len(fork.history("ops.yaml")) == 2
    with pytest.raises(WorldError, match="exists already"):
        worlds.fork("origin", "copy")
    worlds.reset("origin")
    assert origin.history("ops.yaml") == [] and worlds.existing("copy").all_turns() == 2
    with pytest.raises(WorldError, match="no world named 'ghost'"):
        worlds.reset("ghost")


def test_a_restarted_server_continues_every_world_from_sqlite(tmp_path: Path) -> None:
    catalog = load_catalog([OPS])
    first = Simulator(catalog, ScriptedEngine(STATUS, STATUS), SimOptions(attempts=1),
                      Worlds(catalog.scenarios, store=SqliteStore(tmp_path)))
    first.simulate("get_service_status", {"service": "api"}, world="kept", scenario="postgres-down")
    first.simulate("get_service_status", {"service": "web"}, world="kept")
    first.worlds.fork("kept", "kept-fork")
    first.worlds.close()

    engine = ScriptedEngine(STATUS)
    second = Simulator(catalog, engine, SimOptions(attempts=1), Worlds(catalog.scenarios, store=SqliteStore(tmp_path)))
    result = second.simulate("get_service_status", {"service": "worker"}, world="kept")
    assert result.meta[META_KEY]["turn"] == 3 and result.meta[META_KEY]["scenario"] == "postgres-down"
    prompt = "\n".join(m.content for m in engine.requests[0].messages)
    assert '"service": "api"' in prompt and '"service": "web"' in prompt
    assert sorted(second.worlds.names()) == ["kept", "kept-fork"]
    assert second.worlds.existing("kept-fork").all_turns() == 2


def test_a_foreign_or_unwritable_state_dir_is_a_clear_error(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    with sqlite3.connect(foreign / "worlds.sqlite3") as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(WorldError, match=r"another program.*--state-dir"):
        SqliteStore(foreign)
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    with pytest.raises(WorldError, match="cannot keep worlds"):
        SqliteStore(blocked)


def test_stores_are_chosen_by_url_and_number_the_turns_themselves(tmp_path: Path) -> None:
    assert open_store("memory:").url == "memory:"
    assert open_store(None, None).url == "memory:"  # neither option: memory
    store = open_store(f"sqlite://{tmp_path}")  # sqlite:///ABSOLUTE/DIR
    assert isinstance(store, SqliteStore) and store.path == tmp_path / "worlds.sqlite3"
    assert open_store(None, tmp_path / "old").url == f"sqlite://{tmp_path / 'old'}"  # --state-dir DIR
    worlds = Worlds(store=store)
    with worlds.calling("w") as world:
        worlds.record(world, "a.yaml", Turn("a1", "o1"))
        worlds.record(world, "a.yaml", Turn("a2", "o2"))
    world.turns["a.yaml"].pop()  # a stale cache must not number the next turn: the store does
    worlds.record(world, "a.yaml", Turn("a3", "o3"))
    with sqlite3.connect(store.path) as db:
        assert db.execute("SELECT seq, action FROM turns ORDER BY seq").fetchall() == [(0, "a1"), (1, "a2"),
                                                                                      (2, "a3")]
    with pytest.raises(WorldError, match=r"no known scheme.*postgresql://"):
        open_store("redis://localhost")
    with pytest.raises(WorldError, match=r"--state-dir and --store both"):
        open_store("memory:", tmp_path)
    with pytest.raises(WorldError, match="names no directory"):
        open_store("sqlite://")


def test_a_world_lock_holds_a_second_call_until_the_first_ends() -> None:
    worlds = Worlds()
    order: list[str] = []
    with worlds.calling("w"):
        other = threading.Thread(target=lambda: [worlds.calling("w").__enter__(), order.append("second")])
        other.start()
        other.join(0.3)
        order.append("first done")
    other.join(5)
    assert order == ["first done", "second"]



def test_calls_waiting_for_a_world_are_answered_in_arrival_order() -> None:
    worlds = Worlds()
    order: list[int] = []

    def call(number: int) -> None:
        with worlds.calling("queue"):
            order.append(number)

    threads = [threading.Thread(target=call, args=(number,)) for number in range(6)]
    with worlds.calling("queue"):
        for thread in threads:
            thread.start()
            time.sleep(0.05)  # queued behind the holder, one after another
    for thread in threads:
        thread.join(5)
    assert order == list(range(6))
