"""Spec loading: the shipped specs load, and every kind of malformed spec is rejected with a useful message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_sim.base.errors import SpecError
from mcp_sim.core.specs import load_catalog
from tests.conftest import SPECS

GOOD_TOOL = {"name": "ping", "inputSchema": {"type": "object", "properties": {"host": {"type": "string"}}}}


def write(tmp_path: Path, name: str, content: str | object) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_shipped_specs_load_with_worlds_and_examples() -> None:
    catalog = load_catalog([SPECS])
    assert len(catalog.spec_sets) >= 4
    tools = catalog.tools
    assert {"get_weather", "write_file", "read_file", "create_ticket", "restart_service", "tail_logs"} <= set(tools)
    assert tools["tail_logs"].output_schema is None
    assert tools["restart_service"].annotations and tools["restart_service"].annotations["destructiveHint"] is True
    crm = tools["create_ticket"].spec_set
    assert crm is not None and crm.world_data is not None
    assert "$defs" in json.dumps(tools["get_customer"].output_schema)


@pytest.mark.parametrize("document", [
    {"tools": [GOOD_TOOL]},
    [GOOD_TOOL],
    GOOD_TOOL,
], ids=["tools-list-result", "list-of-tools", "single-tool"])
def test_accepts_the_three_document_shapes(tmp_path: Path, document: object) -> None:
    catalog = load_catalog([write(tmp_path, "spec.json", document)])
    assert list(catalog.tools) == ["ping"]
    assert catalog.tools["ping"].definition() == GOOD_TOOL


MALFORMED = [
    ("bad.yaml", "tools: [\n  {name: x\n", "not valid YAML"),
    ("bad.json", '{"tools": [', "not valid JSON"),
    ("empty.yaml", "", "the file is empty"),
    ("noinput.json", {"tools": [{"name": "x"}]}, "missing 'inputSchema'"),
    ("notobject.json", {"tools": [{"name": "x", "inputSchema": {"type": "string"}}]},
     'root must have "type": "object"'),
    ("badschema.json",
     {"tools": [{"name": "x", "inputSchema": {"type": "object", "properties": {"a": {"type": "strng"}}}}]},
     "invalid JSON Schema"),
    ("badname.json", {"tools": [{**GOOD_TOOL, "name": "bad name!"}]}, "not a valid MCP tool name"),
    ("snake.json", {"tools": [{"name": "x", "input_schema": {"type": "object"}}]}, "did you mean 'inputSchema'"),
    ("annot.json", {"tools": [{**GOOD_TOOL, "annotations": {"readOnlyHint": "yes"}}]}, "must be true or false"),
    ("toolsdict.json", {"tools": {"name": "x"}}, "'tools' must be a list"),
    ("world.json", {"world": 5, "tools": [GOOD_TOOL]}, "#/world: must be text"),
    ("badoutput.json", {"tools": [{**GOOD_TOOL, "outputSchema": {"type": "object", "required": "id"}}]},
     "outputSchema/required: invalid JSON Schema"),
    ("exargs.json", {"tools": [{**GOOD_TOOL, "x-sim": {"examples": [{"arguments": {"host": 5}, "result": "ok"}]}}]},
     "x-sim/examples/0/arguments: at /host: 5 is not of type 'string'"),
    ("exresult.json", {"tools": [{**GOOD_TOOL, "outputSchema": {"type": "object", "required": ["up"]},
                                  "x-sim": {"examples": [{"arguments": {}, "result": {}}]}}]},
     "x-sim/examples/0/result: at /: 'up' is a required property"),
    ("scalar.yaml", "42", "expected a mapping with 'tools'"),
]


@pytest.mark.parametrize(("name", "content", "expected"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_specs_are_rejected_naming_the_problem(tmp_path: Path, name: str, content: object,
                                                         expected: str) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(SpecError) as caught:
        load_catalog([path])
    assert expected in str(caught.value)
    assert str(path) in str(caught.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, "many.json", {"tools": [
        {"name": "bad name"},
        {"name": "y", "inputSchema": {"type": "array"}},
        {**GOOD_TOOL, "annotations": {"destructiveHint": 1}},
    ]})
    with pytest.raises(SpecError) as caught:
        load_catalog([path])
    assert len(caught.value.problems) >= 4
    assert "#/tools/0" in str(caught.value) and "#/tools/1" in str(caught.value) and "#/tools/2" in str(caught.value)


def test_duplicate_names_across_files_name_both_files(tmp_path: Path) -> None:
    first = write(tmp_path, "a.json", [GOOD_TOOL])
    second = write(tmp_path, "b.json", [GOOD_TOOL])
    with pytest.raises(SpecError, match=r"already defined in .*a\.json"):
        load_catalog([first, second])


def test_missing_paths_and_empty_directories(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file or directory"):
        load_catalog([tmp_path / "nope.yaml"])
    with pytest.raises(SpecError, match="no spec files"):
        load_catalog([tmp_path])
