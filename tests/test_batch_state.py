"""Tools that touch many records per call (state.batch): a knowledge graph's creates, edits, deletes and
reads of several collections, inferred from the schemas of the real memory server's tools as `mirror` wrote
them (tool_specs/fidelity/memory.yaml, no hand edits).

The recorded sessions of the real server are replayed through the state: every answer it gave, the state
gives too. Then the same spec is served to a real MCP client over stdio with the real model, with the
deletes' example taken away so the model writes their confirmations: reads still agree with the writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from mcp_sim.core.simulator import META_KEY
from mcp_sim.core.specs import load_catalog
from mcp_sim.state.book import StateBook
from mcp_sim.state.live import LiveData
from tests.conftest import subprocess_env

FIDELITY = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
MEMORY = FIDELITY / "memory.yaml"


def book_of(path: Path) -> StateBook:
    return StateBook(load_catalog([path]).spec_sets)


def recorded(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]


def real_answer(step: dict[str, Any]) -> Any:
    result = step["result"]
    return result["content"][0]["text"] if result.get("isError") else result["structuredContent"]


def test_the_memory_servers_tools_are_read_as_batches() -> None:
    effects = book_of(MEMORY).describe()
    assert effects["create_entities"].startswith("create entities from each item of entities, by name")
    assert effects["create_relations"].startswith("create relations from each item of relations, compared whole")
    assert effects["add_observations"].startswith("append to entities.observations the contents")
    assert effects["delete_observations"].startswith("remove from entities.observations the observations")
    assert effects["delete_entities"].startswith("delete entities named in entityNames, by name, with the relations")
    assert effects["delete_relations"].startswith("delete relations named in relations, compared whole")
    assert effects["read_graph"].startswith("read entities and relations (")
    assert "names selects by name" in effects["open_nodes"]
    assert "query searched in every field" in effects["search_nodes"]


@pytest.mark.parametrize("trace", ["memory.jsonl", "memory.train.jsonl"])
def test_every_answer_of_the_real_server_comes_from_the_state(trace: str) -> None:
    book = book_of(MEMORY)
    worlds: dict[str, LiveData] = {}
    for step in recorded(FIDELITY / trace):
        if step["result"].get("isError"):  # the spec shows no failure: its words are not known (below)
            continue
        live = worlds.setdefault(step["session"], LiveData({}))
        planned = book.plan(step["tool"], step["arguments"], live, step["session"])
        assert planned is not None and planned.complete, step
        assert planned.answer == real_answer(step), step
        assert planned.is_error == bool(step["result"].get("isError")), step
        book.commit(planned, live, None, "", planned.is_error)


def test_a_deleted_entity_takes_its_relations_and_a_missing_one_fails() -> None:
    book = book_of(MEMORY)
    live = LiveData({})

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        planned = book.plan(tool, arguments, live, "w")
        assert planned is not None and planned.complete
        book.commit(planned, live, None, "", planned.is_error)
        return planned.answer

    call("create_entities", {"entities": [{"name": n, "entityType": "person", "observations": []} for n in "AB"]})
    call("create_relations", {"relations": [{"from": "A", "to": "B", "relationType": "knows"}]})
    # The same relation twice is one relation; the same entity twice is created once.
    assert call("create_relations", {"relations": [{"from": "A", "to": "B", "relationType": "knows"}]}) == {
        "relations": []}
    call("delete_entities", {"entityNames": ["B"]})
    assert call("read_graph", {}) == {"entities": [{"name": "A", "entityType": "person", "observations": []}],
                                      "relations": []}
    assert call("add_observations", {"observations": [{"entityName": "B", "contents": ["x"]}]}) == \
        "Error: entity B not found"
    # A delete whose own examples show no answer confirms in its sibling's words, its noun swapped.
    assert call("delete_relations", {"relations": []}) == {"success": True, "message": "Relations deleted successfully"}


def test_a_failure_example_gives_the_words_of_a_missing_record(tmp_path: Path) -> None:
    spec = yaml.safe_load(MEMORY.read_text())
    add = next(tool for tool in spec["tools"] if tool["name"] == "add_observations")
    add["x-sim"]["examples"].append({"arguments": {"observations": [{"entityName": "Ghost", "contents": ["boo"]}]},
                                     "result": "Entity with name Ghost not found", "isError": True})
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    planned = book_of(path).plan("add_observations", {"observations": [{"entityName": "Zed", "contents": []}]},
                                 LiveData({}), "w")
    assert planned is not None and planned.is_error and planned.answer == "Entity with name Zed not found"


def test_a_declared_effect_turns_the_batch_off(tmp_path: Path) -> None:
    spec = yaml.safe_load(MEMORY.read_text())
    for tool in spec["tools"]:
        if tool["name"] == "read_graph":
            tool["x-sim"]["state"] = "none"
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    book = book_of(path)
    assert "read_graph" not in book.describe() and book.effect("read_graph") is None
    assert book.plan("read_graph", {}, LiveData({}), "w") is None


def without_delete_examples(folder: Path) -> Path:
    spec = yaml.safe_load(MEMORY.read_text())
    for tool in spec["tools"]:
        if tool["name"].startswith("delete_"):
            tool.get("x-sim", {}).pop("examples", None)
    path = folder / "memory.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_reads_agree_with_the_writes_over_stdio_with_the_real_model(tmp_path: Path) -> None:
    spec = without_delete_examples(tmp_path)

    async def session() -> list[Any]:
        args = ["-m", "mcp_sim", "serve", str(spec), "--threads", "2"]
        params = StdioServerParameters(command=sys.executable, args=args, env=subprocess_env())
        async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
            return [
                await client.call_tool("create_entities", {"entities": [
                    {"name": "Orion", "entityType": "project", "observations": ["deadline in March"]},
                    {"name": "Tom", "entityType": "person", "observations": ["tests Orion"]}]}),
                await client.call_tool("create_relations", {"relations": [
                    {"from": "Tom", "to": "Orion", "relationType": "tests"}]}),
                await client.call_tool("add_observations", {"observations": [
                    {"entityName": "Orion", "contents": ["ships in April"]}]}),
                await client.call_tool("delete_entities", {"entityNames": ["Tom"]}),
                await client.call_tool("open_nodes", {"names": ["Orion", "Tom"]}),
                await client.call_tool("search_nodes", {"query": "april"}),
            ]

    created, related, observed, deleted, opened, searched = anyio.run(session)
    for result in (created, related, observed, opened, searched):
        assert not result.is_error and result.meta is not None, result.content
        assert result.meta[META_KEY]["source"] == "state", result.content
    added = {"entityName": "Orion", "addedObservations": ["ships in April"]}
    assert observed.structured_content == {"results": [added]}
    # The model writes the delete's confirmation (no example says its words); the state pins its success.
    assert deleted.meta is not None and deleted.meta[META_KEY]["source"] == "model"
    assert deleted.structured_content is not None and deleted.structured_content["success"] is True
    orion = {"name": "Orion", "entityType": "project", "observations": ["deadline in March", "ships in April"]}
    assert opened.structured_content == {"entities": [orion], "relations": []}
    assert searched.structured_content == {"entities": [orion], "relations": []}


TASKS = FIDELITY / "taskmanager.yaml"


def test_a_planned_request_mints_task_keys_and_later_calls_read_them_back() -> None:
    """The real task manager's eval session, replayed through the state with the real answers committed:
    request_planning mints task-1.. under req-1 in a fresh world, mark/approve update those tasks,
    get_next_task hands out the first one not done, open_task_details joins its request's fields."""
    book = book_of(TASKS)
    assert book.describe()["request_planning"].startswith("create tasks from each item of tasks, each with a new id")
    assert book.describe()["get_next_task"].startswith("next tasks by id")
    live = LiveData({})
    for step in recorded(FIDELITY / "taskmanager.jsonl")[:8]:  # session 1 up to its failures
        real = json.loads(step["result"]["content"][0]["text"])
        planned = book.plan(step["tool"], step["arguments"], live, "w")
        assert planned is not None, step
        for pointer, value in planned.pins.items():
            node: Any = real
            for part in pointer.strip("/").split("/"):
                node = node[part]
            assert node == value, (step["tool"], pointer)
        assert len(planned.pins) >= 3, step
        book.commit(planned, live, real, "", False)
    assert [task["done"] for task in live.records("tasks", "id")] == [True, True, False]
