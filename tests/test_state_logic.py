"""Live world state with a scripted engine: effects declared and inferred, answers from the state, the
model pinned to it, and the state going wherever its world goes (fork, reset, export, restart, ledger).

The real model and real clients run the same in tests/test_state_model.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.base.errors import SpecError
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.core.worlds import Worlds
from mcp_sim.core.worlds.sqlite_store import SqliteStore
from mcp_sim.core.worlds.transfer import restore
from mcp_sim.rehearsal.ledger import Ledger, read_ledger
from mcp_sim.rehearsal.ledger_observer import LedgerRecorder
from mcp_sim.rehearsal.sources import FixtureSource
from mcp_sim.xsim.fixtures import FixtureSet
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

TASK = {"type": "object", "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                                         "done": {"type": "boolean"}}, "required": ["id", "title", "done"]}
TODO: dict[str, Any] = {
    "world": {"description": "A to-do list.",
              "data": {"tasks": [{"id": "T-1", "title": "Buy milk", "done": False},
                                 {"id": "T-2", "title": "Write report", "done": False}]}},
    "tools": [
        {"name": "create_task", "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}},
                                                "required": ["title"]}, "outputSchema": TASK},
        {"name": "list_tasks", "inputSchema": {"type": "object", "properties": {"done": {"type": "boolean"}}},
         "outputSchema": {"type": "object", "properties": {"tasks": {"type": "array", "items": TASK}},
                          "required": ["tasks"]}},
        {"name": "complete_task", "inputSchema": {"type": "object", "properties": {"task_id": {"type": "string"}},
                                                  "required": ["task_id"]}, "outputSchema": TASK},
        {"name": "delete_task", "inputSchema": {"type": "object", "properties": {"task_id": {"type": "string"}},
                                                "required": ["task_id"]},
         "outputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "deleted": {"type": "boolean"}},
                          "required": ["id", "deleted"]}},
        {"name": "get_task", "inputSchema": {"type": "object", "properties": {"task_id": {"type": "string"}},
                                             "required": ["task_id"]},
         "outputSchema": {"type": "object", "properties": {"found": {"type": "boolean"}, "task": TASK},
                          "required": ["found"]}},
    ],
}


def write_spec(directory: Path, spec: dict[str, Any], name: str = "todo.json") -> Path:
    path = directory / name
    path.write_text(json.dumps(spec))
    return path


def simulator(*specs: Path, answers: tuple[str, ...] = (), worlds: Worlds | None = None,
              **options: Any) -> tuple[Simulator, ScriptedEngine]:
    engine = ScriptedEngine(*answers)
    catalog = load_catalog(list(specs))
    worlds = worlds or Worlds(catalog.scenarios, catalog.default_scenario)
    return Simulator(catalog, engine, SimOptions(**options), worlds), engine


def structured(sim: Simulator, tool: str, arguments: dict[str, Any], world: str = "default") -> Any:
    result = sim.simulate(tool, arguments, world=world)
    assert not result.is_error, result.text
    return result.structured


@pytest.fixture
def todo(tmp_path: Path) -> Path:
    return write_spec(tmp_path, TODO)


def test_the_todo_walkthrough_creates_lists_completes_and_deletes_as_written(todo: Path) -> None:
    sim, engine = simulator(todo)
    ids = [structured(sim, "create_task", {"title": title})["id"] for title in ("A", "B", "C")]
    assert ids == ["T-3", "T-4", "T-5"]
    assert structured(sim, "complete_task", {"task_id": "T-2"}) == {"id": "T-2", "title": "Write report", "done": True}
    assert structured(sim, "delete_task", {"task_id": "T-3"}) == {"id": "T-3", "deleted": True}
    listed = structured(sim, "list_tasks", {})["tasks"]
    assert [task["id"] for task in listed] == ["T-1", "T-2", "T-4", "T-5"]
    assert listed[1]["done"] is True and listed[2] == {"id": "T-4", "title": "B", "done": False}
    assert structured(sim, "list_tasks", {"done": True})["tasks"] == [listed[1]]
    assert structured(sim, "get_task", {"task_id": "T-3"}) == {"found": False}
    assert structured(sim, "get_task", {"task_id": "T-4"})["task"]["title"] == "B"
    assert engine.requests == []  # the state said everything: no model ran


def test_state_answers_say_so_and_writes_carry_their_change(todo: Path) -> None:
    sim, _ = simulator(todo)
    result = sim.simulate("complete_task", {"task_id": "T-1"})
    meta = result.meta[META_KEY]
    assert meta["source"] == "state"
    assert meta["state"] == {"collection": "tasks", "op": "update", "key": "T-1",
                             "before": {"id": "T-1", "title": "Buy milk", "done": False},
                             "after": {"id": "T-1", "title": "Buy milk", "done": True}}


def test_the_model_writes_only_what_the_state_cannot_say_and_the_state_wins(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["world"]["data"]["tasks"][0].pop("done")  # the record lacks a field the output shows
    wrong = {"found": True, "task": {"id": "X-9", "title": "Wrong", "done": True}}
    sim, engine = simulator(write_spec(tmp_path, spec), answers=(json.dumps(wrong),))
    answer = structured(sim, "get_task", {"task_id": "T-1"})
    # The model's id and title lose to the record's; its `done` joins the record.
    assert answer == {"found": True, "task": {"id": "T-1", "title": "Buy milk", "done": True}}
    pinned = engine.requests[0].json_schema
    assert pinned is not None
    task = pinned["properties"]["task"]
    assert task["properties"]["id"] == {"const": "T-1"} and task["properties"]["title"] == {"const": "Buy milk"}
    # A grammar carries the record: the prompt stays the plain call, so the next call's prompt extends it.
    assert engine.requests[0].messages[-1].content == '{"name": "get_task", "arguments": {"task_id": "T-1"}}'
    again = sim.simulate("get_task", {"task_id": "T-1"})
    assert again.meta[META_KEY]["source"] == "state" and again.structured == answer


def test_an_unknown_key_is_decided_once_and_then_agreed_with(todo: Path) -> None:
    sim, engine = simulator(todo, answers=(json.dumps({"found": False}),))
    assert structured(sim, "get_task", {"task_id": "T-77"}) == {"found": False}
    assert structured(sim, "get_task", {"task_id": "T-77"}) == {"found": False}
    assert len(engine.requests) == 1
    engine.enqueue(json.dumps({"found": True, "task": {"id": "T-88", "title": "Invented", "done": False}}))
    first = structured(sim, "get_task", {"task_id": "T-88"})
    assert structured(sim, "get_task", {"task_id": "T-88"}) == first
    assert "T-88" in [task["id"] for task in structured(sim, "list_tasks", {})["tasks"]]


def test_a_deleted_record_is_not_found_the_way_the_examples_say(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    delete = spec["tools"][3]
    delete["x-sim"] = {"examples": [{"arguments": {"task_id": "T-404"}, "isError": True,
                                     "result": "task T-404 does not exist"}]}
    sim, _ = simulator(write_spec(tmp_path, spec))
    assert structured(sim, "delete_task", {"task_id": "T-1"})["deleted"] is True
    again = sim.simulate("delete_task", {"task_id": "T-1"})
    assert again.is_error and again.text == "task T-1 does not exist"


def test_declared_effects_are_checked_with_pointers(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["tools"][0]["x-sim"] = {"state": {"op": "make", "at": "ticket", "wat": 1}}
    with pytest.raises(SpecError) as raised:
        load_catalog([write_spec(tmp_path, spec)])
    text = str(raised.value)
    assert "/tools/0 (tool 'create_task')/x-sim/state/op: must be one of create" in text
    assert "x-sim/state/at: must be a JSON pointer" in text and "x-sim/state/wat: unknown field" in text
    assert "x-sim/state/collection: name the key of world.data" in text


def test_state_none_turns_inference_off(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["tools"][4]["x-sim"] = {"state": "none"}
    sim, _ = simulator(write_spec(tmp_path, spec))
    assert "get_task" not in sim.state.effects() and "list_tasks" in sim.state.effects()


def test_the_shipped_specs_answer_reads_from_their_data() -> None:
    # The seed files have no size, which list_files shows: the model writes only the sizes.
    sim, engine = simulator(SPECS, answers=(json.dumps({"files": [{"path": "/x", "size": 23}], "count": 9}),))
    listed = structured(sim, "list_tickets", {"customer_id": "C-1001"})
    assert [t["id"] for t in listed["tickets"]] == ["T-5001", "T-5004"] and listed["count"] == 2
    assert listed["customer_id"] == "C-1001"
    found = structured(sim, "search_customers", {"query": "example.com", "plan": "pro"})
    assert [c["id"] for c in found["results"]] == ["C-1001", "C-1005"] and found["total"] == 2
    files = structured(sim, "list_files", {"prefix": "/notes"})
    assert files == {"files": [{"path": "/notes/todo.txt", "size": 23}], "count": 1}
    assert len(engine.requests) == 1
    again = sim.simulate("list_files", {"prefix": "/notes"})  # the size joined the record
    assert again.structured == files and again.meta[META_KEY]["source"] == "state"


def test_a_create_in_the_crm_continues_the_ticket_ids_and_pins_what_is_known() -> None:
    sim, engine = simulator(SPECS, answers=(json.dumps({"customer_id": "C-9999", "ticket": {
        "id": "T-1", "subject": "other", "priority": "low", "status": "closed", "assignee": "x",
        "created_at": "2025-06-01T12:00:00Z", "closed_at": None}}),))
    created = structured(sim, "create_ticket", {"customer_id": "C-1002", "subject": "Zip broken",
                                                "priority": "high"})
    assert created["customer_id"] == "C-1002"
    assert created["ticket"] == {"id": "T-5005", "subject": "Zip broken", "priority": "high", "status": "open",
                                 "assignee": None, "created_at": "2025-06-01T12:00:00Z", "closed_at": None}
    listed = structured(sim, "list_tickets", {"customer_id": "C-1002"})
    assert listed["tickets"] == [created["ticket"]] and len(engine.requests) == 1


def test_a_keyed_mapping_collection_is_updated_in_place() -> None:
    restart = {"service": "worker", "state": "running", "pid": 4102, "restarted_at": "2025-06-01T12:00:00Z"}
    sim, _ = simulator(SPECS, answers=(json.dumps(restart),))
    assert structured(sim, "restart_service", {"service": "worker"}) == restart
    live = sim.worlds.get("default").live[str(SPECS / "ops.yaml")]
    assert live.data["services"]["worker"] == {"state": "running", "version": "2.14.0", "uptime_s": 0,
                                               "pid": 4102, "restarted_at": "2025-06-01T12:00:00Z"}


def test_fork_reset_export_and_restart_keep_the_state(todo: Path, tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "state")
    catalog = load_catalog([todo])
    sim, _ = simulator(todo, worlds=Worlds(catalog.scenarios, store=store))
    structured(sim, "create_task", {"title": "Kept"}, world="w1")
    sim.worlds.fork("w1", "w2")
    structured(sim, "delete_task", {"task_id": "T-3"}, world="w2")
    exported = sim.worlds.export(sim.worlds.existing("w1"))
    assert [t["id"] for t in next(iter(exported["state"].values()))["data"]["tasks"]] == ["T-1", "T-2", "T-3"]
    store.close()

    restarted, _ = simulator(todo, worlds=Worlds(catalog.scenarios, store=SqliteStore(tmp_path / "state")))
    assert [t["id"] for t in structured(restarted, "list_tasks", {}, world="w1")["tasks"]] == ["T-1", "T-2", "T-3"]
    assert [t["id"] for t in structured(restarted, "list_tasks", {}, world="w2")["tasks"]] == ["T-1", "T-2"]
    assert structured(restarted, "create_task", {"title": "Next"}, world="w2")["id"] == "T-4"  # never reused
    restarted.worlds.reset("w1")
    assert [t["id"] for t in structured(restarted, "list_tasks", {}, world="w1")["tasks"]] == ["T-1", "T-2"]


def test_a_scenario_seeds_the_state(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["world"]["scenarios"] = {"empty": {"data": {"tasks": []}}}
    sim, _ = simulator(write_spec(tmp_path, spec))
    assert structured(sim, "list_tasks", {}, world="plain")["tasks"] != []
    result = sim.simulate("list_tasks", {}, world="bare", scenario="empty")
    assert result.structured == {"tasks": []}


def test_the_ledger_records_each_write_before_and_after(todo: Path, tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    engine = ScriptedEngine()
    sim = Simulator(load_catalog([todo]), engine, observers=[LedgerRecorder(ledger)])
    sim.simulate("complete_task", {"task_id": "T-2"})
    sim.simulate("delete_task", {"task_id": "T-1"})
    entries = read_ledger(tmp_path / "ledger.jsonl")
    assert [entry.state["op"] for entry in entries if entry.state] == ["update", "delete"]
    assert entries[1].state is not None and entries[1].state["before"]["title"] == "Buy milk"
    assert entries[1].state["after"] is None


def test_a_fixture_answer_changes_the_state_too(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["tools"][0]["x-sim"] = {"fixtures": [{"match": {"title": "Pinned"},
                                               "result": {"id": "T-100", "title": "Pinned", "done": False}}]}
    path = write_spec(tmp_path, spec)
    engine = ScriptedEngine()
    catalog = load_catalog([path])
    fixtures = FixtureSet([f for tool in catalog.tools.values() for f in tool.fixtures])
    sim = Simulator(catalog, engine, sources=[FixtureSource(fixtures)])
    created = sim.simulate("create_task", {"title": "Pinned"})
    assert created.meta[META_KEY]["source"] == "fixture"
    assert structured(sim, "get_task", {"task_id": "T-100"}) == {"found": True, "task": created.structured}
    # The fixture's key joins the pattern: the next create continues after it.
    assert structured(sim, "create_task", {"title": "Next"})["id"] == "T-101"


def test_a_text_tool_is_shown_the_records_it_touches_next_to_the_call(tmp_path: Path) -> None:
    spec = json.loads(json.dumps(TODO))
    spec["tools"].append({"name": "describe_task", "inputSchema": {
        "type": "object", "properties": {"task_id": {"type": "string"}}, "required": ["task_id"]}})
    sim, engine = simulator(write_spec(tmp_path, spec), answers=("Task T-2: Write report, open.",))
    result = sim.simulate("describe_task", {"task_id": "T-2"})
    assert result.text == "Task T-2: Write report, open."
    prompt = engine.requests[0].messages[-1].content
    assert prompt.startswith('{"name": "describe_task"') and '"title": "Write report"' in prompt
    assert sim.worlds.get("default").history(str(tmp_path / "todo.json"))[-1].action == \
        '{"name": "describe_task", "arguments": {"task_id": "T-2"}}'  # the history keeps the bare call


def test_an_imported_all_of_record_gets_its_key_pinned(tmp_path: Path) -> None:
    pet = {"allOf": [{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                     {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}]}
    spec = {"tools": [
        {"name": "addPet", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
         "outputSchema": {"type": "object", **pet}},
        {"name": "findPets", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"result": {"type": "array", "items": pet}}}}]}
    sim, engine = simulator(write_spec(tmp_path, spec, "pets.json"))
    assert [structured(sim, "addPet", {"name": name})["id"] for name in ("Rex", "Tom")] == [1, 2]
    assert structured(sim, "findPets", {})["result"] == [{"name": "Rex", "id": 1}, {"name": "Tom", "id": 2}]
    assert engine.requests == []


def test_a_key_the_output_does_not_show_is_never_pinned_into_it(tmp_path: Path) -> None:
    """A mirrored filesystem's read_text_file answers {content} only: the path it is asked for is no field."""
    closed = {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
              "additionalProperties": False}
    path_only = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    spec = {"tools": [{"name": "write_file", "inputSchema": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}}, "outputSchema": closed},
        {"name": "read_text_file", "inputSchema": path_only, "outputSchema": closed}]}
    sim, engine = simulator(write_spec(tmp_path, spec, "fs.json"), answers=(json.dumps({"content": "made up"}),))
    assert structured(sim, "read_text_file", {"path": "/never"}) == {"content": "made up"}  # the model decided
    assert engine.requests[0].json_schema is not None and "path" not in engine.requests[0].json_schema["properties"]
    sim.simulate("write_file", {"path": "/a", "content": "alpha"})
    assert structured(sim, "read_text_file", {"path": "/a"}) == {"content": "alpha"}


def test_an_integer_key_deleted_is_never_given_again(tmp_path: Path) -> None:
    pet = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
           "required": ["id", "name"]}
    spec = {"tools": [
        {"name": "add_pet", "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
         "outputSchema": pet},
        {"name": "delete_pet", "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}},
         "outputSchema": {"type": "object", "properties": {"deleted": {"type": "boolean"}}}}]}
    sim, engine = simulator(write_spec(tmp_path, spec, "pets.json"))
    assert structured(sim, "add_pet", {"name": "Rex"})["id"] == 1
    structured(sim, "delete_pet", {"id": 1})
    assert structured(sim, "add_pet", {"name": "Tom"}) == {"id": 2, "name": "Tom"}
    assert engine.requests == []


def test_an_exported_world_imports_with_its_state(todo: Path) -> None:
    sim, _ = simulator(todo)
    structured(sim, "create_task", {"title": "Kept"}, world="w1")
    structured(sim, "delete_task", {"task_id": "T-1"}, world="w1")
    exported = json.loads(json.dumps(sim.worlds.export(sim.worlds.existing("w1"))))
    restore(sim.worlds, "w2", exported)
    assert [t["id"] for t in structured(sim, "list_tasks", {}, world="w2")["tasks"]] == ["T-2", "T-3"]
    assert structured(sim, "get_task", {"task_id": "T-1"}, world="w2") == {"found": False}
    assert sim.worlds.export(sim.worlds.existing("w2"))["state"] != {}


BENCH = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"


def test_a_text_tool_writes_and_lists_in_its_own_examples_words_without_the_model() -> None:
    sim, engine = simulator(BENCH / "redis.yaml", answers=("Successfully deleted 2 keys",))
    said = [sim.simulate(tool, arguments, "w") for tool, arguments in [
        ("set", {"key": "user:1:name", "value": "Alice"}), ("set", {"key": "user:2:name", "value": "Bob"}),
        ("set", {"key": "config:theme", "value": "dark"}), ("list", {"pattern": "user:*"}),
        ("delete", {"key": ["user:2:name", "config:theme"]}), ("list", {"pattern": "*"}),
        ("get", {"key": "user:2:name"}), ("set", {"key": "user:1:name", "value": "Alicia"}),
        ("get", {"key": "user:1:name"})]]
    texts = [result.text for result in said]
    assert texts[0] == "Successfully set key: user:1:name"  # the example's words: 'Successfully set key: greeting'
    assert texts[3] == "Found keys:\nuser:1:name\nuser:2:name"  # a glob over the keys, in the example's layout
    assert texts[5] == "Found keys:\nuser:1:name"  # a delete of several keys removes each
    assert said[6].is_error and texts[8] == "Alicia"
    assert [result.meta[META_KEY]["source"] for result in said].count("model") == 1  # only the two-key delete
    assert len(engine.requests) == 1


def test_a_write_keeps_what_it_wrote_when_its_answer_is_a_confirmation() -> None:
    sim, engine = simulator(BENCH / "filesystem.yaml")
    wrote = sim.simulate("write_file", {"path": "/s/a.txt", "content": "alpha\n"}, "w")
    assert wrote.structured == {"content": "Successfully wrote to /s/a.txt"}  # the example's words
    assert sim.simulate("read_text_file", {"path": "/s/a.txt"}, "w").structured == {"content": "alpha\n"}
    assert engine.requests == []


def test_files_move_take_edits_and_read_by_lines_as_the_filesystem_server_does() -> None:
    sim, engine = simulator(BENCH / "filesystem.yaml", answers=('{"content": "a diff"}',))
    sim.simulate("write_file", {"path": "/s/a.txt", "content": "alpha\nbeta\n"}, "w")
    diff = sim.simulate("edit_file", {"path": "/s/a.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}, "w")
    # The diff of the file's text before and after, in the layout of the tool's example (the real server's).
    assert diff.structured == {"content": "```diff\nIndex: /s/a.txt\n" + "=" * 67 + "\n--- /s/a.txt\toriginal\n"
                               "+++ /s/a.txt\tmodified\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n```\n\n"}
    read = sim.simulate("read_text_file", {"path": "/s/a.txt"}, "w")
    assert read.structured == {"content": "alpha\ngamma\n"}  # the edit applied, not the diff it answered
    assert sim.simulate("read_text_file", {"path": "/s/a.txt", "head": 1}, "w").structured == {"content": "alpha"}
    moved = sim.simulate("move_file", {"source": "/s/a.txt", "destination": "/s/b.txt"}, "w")
    assert moved.structured == {"content": "Successfully moved /s/a.txt to /s/b.txt"}  # the example's words
    assert sim.simulate("read_text_file", {"path": "/s/b.txt"}, "w").structured == {"content": "alpha\ngamma\n"}
    gone = sim.simulate("read_text_file", {"path": "/s/a.txt"}, "w")
    assert gone.is_error and "ENOENT" in gone.text  # the tool's own failure, from its example
    assert engine.requests == []  # the state and the examples said it all
    # An edit of a file the world has not seen: no text to diff, so the model writes the answer.
    sim.simulate("edit_file", {"path": "/s/new.txt", "edits": [{"oldText": "x", "newText": "y"}]}, "w")
    assert len(engine.requests) == 1


def test_head_and_tail_count_lines_as_the_filesystem_server_does() -> None:
    sim, _ = simulator(BENCH / "filesystem.yaml")
    sim.simulate("write_file", {"path": "/s/t.md", "content": "- milk\n- bike\n"}, "w")
    tail = sim.simulate("read_text_file", {"path": "/s/t.md", "tail": 1}, "w").structured
    head = sim.simulate("read_text_file", {"path": "/s/t.md", "head": 2}, "w").structured
    assert (tail, head) == ({"content": ""}, {"content": "- milk\n- bike"})  # the real server's answers
    assert sim.simulate("read_text_file", {"path": "/s/t.md"}, "w").structured == {"content": "- milk\n- bike\n"}


def test_sql_tools_answer_from_the_worlds_own_database_in_the_servers_words() -> None:
    sim, engine = simulator(BENCH / "sqlite.yaml")

    def said(tool: str, **arguments: Any) -> str:
        return sim.simulate(tool, arguments, "w").text

    assert said("create_table", query="CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, n REAL)") \
        == "Table created successfully"  # the example's words
    assert said("write_query", query="INSERT INTO t (name, n) VALUES ('a', 1.5), ('b', 2)") == "[{'affected_rows': 2}]"
    assert said("write_query", query="UPDATE t SET n = 9 WHERE name = 'b'") == "[{'affected_rows': 1}]"
    assert said("read_query", query="SELECT name, n FROM t ORDER BY n DESC") == \
        "[{'name': 'b', 'n': 9.0}, {'name': 'a', 'n': 1.5}]"
    assert said("list_tables") == "[{'name': 't'}]"
    assert said("describe_table", table_name="t").startswith("[{'cid': 0, 'name': 'id', 'type': 'INTEGER'")
    assert said("describe_table", table_name="ghosts") == "[]"
    # A failure in the words the read tool's example showed, shared by the write tool; not flagged, as there.
    missing = sim.simulate("write_query", {"query": "INSERT INTO nowhere VALUES (1)"}, "w")
    assert (missing.text, missing.is_error) == ("Database error: no such table: nowhere", False)
    # Nothing reaches outside the world's in-memory database.
    assert said("read_query", query="SELECT * FROM t WHERE 0; ATTACH 'x.db' AS x").startswith("Database error")
    assert "no such table" in sim.simulate("read_query", {"query": "SELECT * FROM t"}, "other").text  # worlds apart
    assert engine.requests == []


def test_check_describes_a_put_and_a_move_as_they_are_applied() -> None:
    sim, _ = simulator(BENCH / "filesystem.yaml")
    described = sim.state.describe()
    assert described["write_file"] == "create files by path; from argument path; record at /"  # a put: no new keys
    assert described["move_file"].startswith("move files by path; from argument source; to argument destination")
