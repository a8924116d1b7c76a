"""The Postgres world store without a model: two stores on one throwaway cluster stand for two instances."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from mcp_sim.core.prompt import Turn
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.core.worlds import WorldError, Worlds
from mcp_sim.core.worlds.postgres_store import SCHEMA_VERSION, PostgresStore
from mcp_sim.core.worlds.stores import open_store
from tests.conftest import SPECS
from tests.pg_cluster import Cluster
from tests.scripted import ScriptedEngine


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    made.start()
    yield made
    made.remove()


def test_two_instances_share_worlds_and_read_the_latest(cluster: Cluster) -> None:
    first, second = Worlds(store=open_store(cluster.url)), Worlds(store=open_store(cluster.url))
    with first.calling("shared") as world:
        first.record(world, "a.yaml", Turn("a1", "o1"))
    with second.calling("shared") as world:  # second's first look: read from the store
        assert [turn.action for turn in world.turns["a.yaml"]] == ["a1"]
        second.record(world, "a.yaml", Turn("a2", "o2"))
    with first.calling("shared") as world:  # first's cached copy is behind: read again
        assert [turn.action for turn in world.turns["a.yaml"]] == ["a1", "a2"]
    fork = second.fork("shared", "shared-fork")
    assert first.existing("shared-fork").all_turns() == 2 and fork.forked_from == "shared"
    first.reset("shared")
    assert second.existing("shared").all_turns() == 0
    second.delete("shared-fork")
    assert "shared-fork" not in first.names() and "shared" in first.names()
    with psycopg.connect(cluster.url) as db:
        assert db.execute("SELECT version FROM mcp_sim_schema").fetchone() == (SCHEMA_VERSION,)


def test_one_world_is_held_by_one_instance_at_a_time(cluster: Cluster) -> None:
    stores = [Worlds(store=open_store(cluster.url)) for _ in range(2)]
    spans: list[tuple[float, float]] = []

    def call(worlds: Worlds, number: int) -> None:
        with worlds.calling("serial") as world:
            started = time.monotonic()
            time.sleep(0.2)  # a slow answer: the other instance must wait for it
            worlds.record(world, "a.yaml", Turn(f"call {number}", "ok"))
            spans.append((started, time.monotonic()))

    threads = [threading.Thread(target=call, args=(stores[n % 2], n)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    spans.sort()
    assert len(spans) == 4 and all(spans[n][1] <= spans[n + 1][0] for n in range(3)), spans
    turns = stores[0].existing("serial").turns["a.yaml"]
    assert sorted(turn.action for turn in turns) == [f"call {n}" for n in range(4)]


def test_a_killed_instance_releases_its_world(cluster: Cluster) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from mcp_sim.core.worlds.stores import open_store\n"
        f"store = open_store({cluster.url!r})\n"
        "with store.hold('orphan'):\n    print('held', flush=True); time.sleep(600)")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        worlds = Worlds(store=open_store(cluster.url))
        waited = threading.Event()
        thread = threading.Thread(target=lambda: [worlds.calling("orphan").__enter__(), waited.set()])
        thread.start()
        assert not waited.wait(0.5)  # the live holder keeps it
        holder.kill()  # kill -9: no unlock is ever sent; Postgres ends the session and its lock
        assert waited.wait(10)
    finally:
        holder.kill()
        holder.wait()


def test_postgres_down_is_a_clear_error_and_the_store_recovers(cluster: Cluster) -> None:
    worlds = Worlds(store=open_store(cluster.url))
    with worlds.calling("outage") as world:
        worlds.record(world, "a.yaml", Turn("before", "ok"))
    cluster.stop()
    try:
        with pytest.raises(WorldError, match=rf"cannot reach the world store {cluster.url}.*refused"):
            open_store(cluster.url)
        with pytest.raises(WorldError, match=rf"world store {cluster.url} failed"), worlds.calling("outage"):
            pass
    finally:
        cluster.start()
    with worlds.calling("outage") as world:
        worlds.record(world, "a.yaml", Turn("after", "ok"))
    assert [turn.action for turn in worlds.existing("outage").turns["a.yaml"]] == ["before", "after"]


def test_a_newer_schema_is_refused_and_passwords_are_not_shown(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url, autocommit=True) as db:
        db.execute("UPDATE mcp_sim_schema SET version = %s", (SCHEMA_VERSION + 1,))
    try:
        with pytest.raises(WorldError, match="newer mcp-sim"):
            PostgresStore(cluster.url)
    finally:
        with psycopg.connect(cluster.url, autocommit=True) as db:
            db.execute("UPDATE mcp_sim_schema SET version = %s", (SCHEMA_VERSION,))
    with pytest.raises(WorldError) as refused:
        open_store(f"postgresql://someone:secret@127.0.0.1:{cluster.port}/nosuchdb")
    assert "secret" not in str(refused.value) and "someone:***@" in str(refused.value)


def test_each_instance_prompts_with_the_same_bytes_and_appends_the_other_instances_calls(cluster: Cluster) -> None:
    """What a serving engine's prefix cache needs: call N+1's prompt starts with call N's, byte for byte,
    whichever instance builds it."""
    catalog = load_catalog([SPECS / "weather.yaml"])
    answers = [json.dumps({"city": f"C{n}", "temperature": 1.0, "conditions": "fog", "humidity": 90,
                           "wind_speed": 3.0, "units": "metric"}) for n in range(3)]
    engines = [ScriptedEngine(answers[0], answers[2]), ScriptedEngine(answers[1])]
    instances = [Simulator(catalog, engine, SimOptions(attempts=1), Worlds(catalog.scenarios, store=open_store(
        cluster.url))) for engine in engines]
    for number, instance in enumerate([0, 1, 0]):
        result = instances[instance].simulate("get_weather", {"city": f"C{number}"}, world="prefix")
        assert not result.is_error and result.meta[META_KEY]["turn"] == number + 1
    prompts = [[(m.role, m.content) for m in request.messages] for request in
               (engines[0].requests[0], engines[1].requests[0], engines[0].requests[1])]
    assert prompts[1][:len(prompts[0])] == prompts[0] and prompts[2][:len(prompts[1])] == prompts[1]
    assert [len(prompt) for prompt in prompts] == [2, 4, 6]
