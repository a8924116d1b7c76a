"""Scale-out without a model: mcp-sim instances behind HAProxy (round-robin) sharing worlds in Postgres.

The spec is examples/todo.yaml: its creates, lists and completions are answered by the world's live state,
so `--replay-only` instances need no model, and every answer is a fact about the shared state that a stale or
split world would get wrong (a task id handed out twice, a task missing from a list)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from mcp_sim.core.simulator import META_KEY
from mcp_sim.core.worlds.postgres_store import lock_key
from tests.balancer import Balancer
from tests.conftest import REPO, free_port, start_http_server, stop
from tests.pg_cluster import Cluster

pytestmark = pytest.mark.anyio
TODO = REPO / "examples" / "todo.yaml"
WORLDS = [f"w{n}" for n in range(4)]
ROUNDS = 3
SLOW_MS = 700  # complete_task takes this long (a latency fault), so two such calls would overlap


@dataclass
class Scale:
    postgres: Cluster
    balancer: Balancer
    instances: dict[str, tuple[subprocess.Popen[bytes], str]] = field(default_factory=dict)

    def admin(self, path: str = "", via: str | None = None) -> Any:
        base = (self.instances[via][1] if via else self.balancer.url).removesuffix("/mcp")
        response = httpx.get(f"{base}/admin/worlds{path}", timeout=30)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scale]:
    faults = tmp_path_factory.mktemp("scale") / "slow.yaml"
    faults.write_text(f"faults:\n  - {{tool: complete_task, kind: latency, probability: 1.0, ms: {SLOW_MS}}}\n")
    postgres = Cluster()
    postgres.start()
    instances = {}
    try:
        for name in ("a", "b"):
            instances[name] = start_http_server(str(TODO), "--replay-only", "--faults", str(faults),
                                                "--store", postgres.url)
        balancer = Balancer({name: int(url.split(":")[2].split("/")[0]) for name, (_, url) in instances.items()})
        yield Scale(postgres, balancer, instances)
        balancer.stop()
    finally:
        for process, _ in instances.values():
            stop(process)
        postgres.remove()


async def held_by_someone(url: str, world: str) -> None:
    """Wait until some session holds WORLD's advisory lock."""
    objid = lock_key(world) & 0xFFFFFFFF  # pg_locks shows a bigint key as two 32-bit halves
    with psycopg.connect(url, autocommit=True) as db:
        for _ in range(100):
            if db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objid = %s",
                          (objid,)).fetchone() != (0,):
                return
            await anyio.sleep(0.05)
    raise AssertionError(f"nobody took world {world!r}'s lock")


def result_of(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return result.structured_content  # type: ignore[no-any-return]


async def test_eight_clients_on_four_worlds_on_two_instances_keep_every_world_whole(scale: Scale) -> None:
    answered: dict[str, list[str]] = {world: [] for world in WORLDS}

    async def client(number: int) -> None:
        # Each world has two clients, one on each instance, straight to it: which instance answers is then
        # fixed by the test, not by how the balancer happened to interleave eight clients' requests.
        world, instance = WORLDS[number // 2], "ab"[number % 2]
        async with Client(f"{scale.instances[instance][1]}?world={world}", read_timeout_seconds=60) as session:
            for round_ in range(ROUNDS):
                title = f"{world}-client{number}-{round_}"
                created = result_of(await session.call_tool("create_task", {"title": title}))
                assert created["title"] == title
                answered[world].append(created["id"])

    await asyncio.gather(*(client(number) for number in range(8)))
    for world in WORLDS:
        # One at a time across instances: each create saw every earlier one, so no id was handed out twice.
        assert sorted(answered[world]) == [f"T-{n}" for n in range(2, 2 + 2 * ROUNDS)]
        async with Client(f"{scale.balancer.url}?world={world}", read_timeout_seconds=60) as session:
            listed = result_of(await session.call_tool("list_tasks", {}))["tasks"]
        titles = {task["title"] for task in listed}
        mine = {f"{world}-client{n}-{r}" for n in range(8) if WORLDS[n // 2] == world for r in range(ROUNDS)}
        assert titles == {"Buy milk"} | mine  # the live state agrees with every write, and has no other world's
        exported = scale.admin(f"/{world}")
        actions = [json.loads(turn["action"]) for turns in exported["history"].values() for turn in turns]
        created = [action["arguments"]["title"] for action in actions if action["name"] == "create_task"]
        assert sorted(created) == sorted(mine) and len(actions) == 2 * ROUNDS + 1  # all its calls, only its own
        assert exported["calls"] == 2 * ROUNDS + 1


async def test_two_calls_into_one_world_at_once_on_two_instances_are_answered_one_after_the_other(
        scale: Scale) -> None:
    results: dict[str, Any] = {}

    async def call(instance: str) -> None:
        async with Client(f"{scale.instances[instance][1]}?world=race", read_timeout_seconds=60) as session:
            results[instance] = await session.call_tool("complete_task", {"task_id": "T-1"})

    started = time.monotonic()
    async with anyio.create_task_group() as group:
        group.start_soon(call, "a")
        group.start_soon(call, "b")
    elapsed = time.monotonic() - started
    assert elapsed >= 2 * SLOW_MS / 1000  # the second waited for the first (each takes SLOW_MS, under the lock)
    turns = sorted(result.meta[META_KEY]["turn"] for result in results.values())
    assert turns == [1, 2] and all(result_of(result)["done"] for result in results.values())
    assert scale.admin("/race")["calls"] == 2  # neither lost


async def test_fork_reset_and_export_work_through_any_instance(scale: Scale) -> None:
    async with Client(f"{scale.balancer.url}?world=origin", read_timeout_seconds=60) as session:
        for title in ("one", "two", "three"):
            result_of(await session.call_tool("create_task", {"title": title}))
    runner = CliRunner()
    forked = runner.invoke(cli, ["worlds", "fork", "origin", "copy", "--url", scale.balancer.url])
    assert forked.exit_code == 0, forked.output
    exports = [scale.admin("/copy", via=name) for name in ("a", "b")]
    assert exports[0]["history"] == exports[1]["history"] == scale.admin("/origin")["history"]
    assert exports[0]["forked_from"] == "origin" and exports[0]["state"] == scale.admin("/origin")["state"]
    reset = runner.invoke(cli, ["worlds", "reset", "copy", "--url", scale.balancer.url])
    assert reset.exit_code == 0, reset.output
    assert [scale.admin("/copy", via=name)["calls"] for name in ("a", "b")] == [0, 0]
    async with Client(f"{scale.balancer.url}?world=copy", read_timeout_seconds=60) as session:
        listed = result_of(await session.call_tool("list_tasks", {}))["tasks"]
    assert [task["title"] for task in listed] == ["Buy milk"]  # the reset reached the state on every instance
    shown = runner.invoke(cli, ["worlds", "export", "origin", "--url", scale.balancer.url])
    assert shown.exit_code == 0 and json.loads(shown.output)["calls"] == 3


async def test_the_world_page_of_any_instance_shows_the_calls_of_every_instance(scale: Scale) -> None:
    for name, title in (("a", "through a"), ("b", "through b")):
        async with Client(f"{scale.instances[name][1]}?world=paged", read_timeout_seconds=60) as session:
            result_of(await session.call_tool("create_task", {"title": title}))
    views = {}
    for name in ("a", "b"):
        base = scale.instances[name][1].removesuffix("/mcp")
        response = httpx.get(f"{base}/ui/worlds/paged/view.json", timeout=30)
        response.raise_for_status()
        views[name] = response.json()
    for name, mine in (("a", 0), ("b", 1)):
        calls = views[name]["calls"]
        assert [call["arguments"]["title"] for call in calls] == ["through a", "through b"]
        # What answered a call, and how fast, is known to the instance that answered it.
        assert calls[mine]["source"] == "state" and calls[1 - mine]["source"] is None, (name, calls)
    created = [json.loads(call["answer"])["id"] for call in views["b"]["calls"]]
    assert [row["key"] for row in views["b"]["tables"][0]["rows"]][-2:] == created  # the shared state, as tables


async def test_postgres_down_at_startup_is_a_clear_error_and_lost_mid_run_an_is_error_until_it_returns(
        scale: Scale) -> None:
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    refused = CliRunner().invoke(cli, ["serve", str(TODO), "--replay-only", "--store", nowhere])
    assert refused.exit_code != 0 and nowhere in refused.output and "refused" in refused.output, refused.output
    scale.postgres.stop()
    try:
        async with Client(f"{scale.balancer.url}?world=outage", read_timeout_seconds=60) as session:
            lost = await session.call_tool("create_task", {"title": "while down"})
    finally:
        scale.postgres.start()
    assert lost.is_error and f"world store {scale.postgres.url}" in lost.content[0].text  # type: ignore[union-attr]
    async with Client(f"{scale.balancer.url}?world=outage", read_timeout_seconds=60) as session:
        for _ in range(2):  # both instances recovered
            assert result_of(await session.call_tool("create_task", {"title": "after"}))["id"] in ("T-2", "T-3")
    assert scale.admin("/outage")["calls"] == 2


async def test_kill_9_of_an_instance_mid_call_loses_nothing_answered_and_the_world_goes_on(scale: Scale) -> None:
    answered: list[str] = []
    async with Client(f"{scale.balancer.url}?world=survivor", read_timeout_seconds=60) as session:
        for number in range(4):
            answered.append(result_of(await session.call_tool("create_task", {"title": f"before {number}"}))["id"])

    process, url = scale.instances["b"]

    async def doomed() -> None:  # b holds the world's lock in this call when it dies
        with contextlib.suppress(Exception):  # the connection drops with the instance: no answer comes
            async with Client(f"{url}?world=survivor", read_timeout_seconds=60) as session:
                await session.call_tool("complete_task", {"task_id": "T-1"})

    async with anyio.create_task_group() as group:
        group.start_soon(doomed)
        await held_by_someone(scale.postgres.url, "survivor")  # b is inside the call, holding the world
        process.kill()  # kill -9, mid-call
        process.wait()
        await anyio.sleep(0.5)
        group.cancel_scope.cancel()
    async with Client(f"{scale.balancer.url}?world=survivor", read_timeout_seconds=60) as session:
        for number in range(4):  # the balancer sends them all to a, which gets the world's lock
            answered.append(result_of(await session.call_tool("create_task", {"title": f"after {number}"}))["id"])
        listed = result_of(await session.call_tool("list_tasks", {}))["tasks"]
    assert answered == [f"T-{n}" for n in range(2, 10)]  # one after another, nothing answered lost or reused
    assert {task["id"] for task in listed} == {"T-1", *answered}
    assert not any(task["done"] for task in listed)  # the call killed mid-way was never answered, nor stored

