"""Scale-out with the real model: two instances behind HAProxy on one Postgres store, each answering a model
call in one world; each prompt holds every earlier call of its world, whichever instance answered it, and
nothing of another world. Loads SmolLM2: run under the model lock (`flock /tmp/mcp-sim-model.lock ...`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from mcp_sim.core.simulator import META_KEY
from tests.balancer import Balancer
from tests.conftest import SPECS, start_http_server, stop
from tests.pg_cluster import Cluster

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def balancer() -> Iterator[Balancer]:
    postgres = Cluster()
    postgres.start()
    instances = []
    try:
        for _ in range(2):
            instances.append(start_http_server(str(SPECS / "files.yaml"), "--expose-prompt", "--max-tokens", "64",
                                               "--store", postgres.url, timeout=120))
        made = Balancer({f"i{n}": int(url.split(":")[2].split("/")[0]) for n, (_, url) in enumerate(instances)})
        yield made
        made.stop()
    finally:
        for process, _ in instances:
            stop(process)
        postgres.remove()


def prompt_of(result: Any) -> str:
    return "\n".join(message["content"] for message in result.meta[META_KEY]["prompt"][1:])


async def test_model_calls_on_both_instances_see_all_of_their_world_and_none_of_another(balancer: Balancer) -> None:
    async with Client(f"{balancer.url}?world=other", read_timeout_seconds=300) as other:
        await other.call_tool("write_file", {"path": "/secret.txt", "content": "another world's file"})
    async with Client(f"{balancer.url}?world=mine", read_timeout_seconds=300) as mine:
        await mine.call_tool("write_file", {"path": "/a.txt", "content": "first write"})
        await mine.call_tool("write_file", {"path": "/b.txt", "content": "second write"})
        first = await mine.call_tool("read_file", {"path": "/missing-1.txt"})  # not in the state: the model
        second = await mine.call_tool("read_file", {"path": "/missing-2.txt"})
    calls = [row for row in balancer.requests() if row[4] == "tools/call" and row[2] == "/mcp?world=mine"]
    assert [row[0] for row in calls][-2:] in (["i0", "i1"], ["i1", "i0"])  # the model calls, one per instance
    for result, turn in ((first, 3), (second, 4)):
        assert result.meta[META_KEY]["source"] == "model" and result.meta[META_KEY]["turn"] == turn
        assert "first write" in prompt_of(result) and "second write" in prompt_of(result)
        assert "another world's file" not in prompt_of(result)
    assert "missing-1.txt" in prompt_of(second)  # the first model call, answered by the other instance
