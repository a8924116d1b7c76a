"""Schemas prepared for grammars: bounded, normalized, and accepted by llama.cpp's real converter."""

from __future__ import annotations

import copy

from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.grammar_schema import prepare_for_grammar
from mcp_sim.specs import load_catalog
from tests.conftest import SPECS


def test_type_lists_become_anyof_branches_that_keep_their_properties() -> None:
    schema = {"type": "object", "properties": {"owner": {
        "type": ["object", "null"], "properties": {"id": {"type": "string"}}, "required": ["id"]}}}
    owner = prepare_for_grammar(schema)["properties"]["owner"]
    assert owner["anyOf"][1] == {"type": "null"}
    assert owner["anyOf"][0]["properties"]["id"]["type"] == "string" and owner["anyOf"][0]["required"] == ["id"]


def test_unbounded_strings_and_arrays_get_bounds_but_the_original_is_untouched() -> None:
    schema = {"type": "object", "properties": {
        "id": {"type": "string"}, "code": {"type": "string", "maxLength": 6},
        "tags": {"type": "array", "items": {"type": "string"}}, "state": {"type": "string", "enum": ["a", "b"]},
        "at": {"type": "string", "format": "date-time"}, "mail": {"type": "string", "format": "email"}}}
    original = copy.deepcopy(schema)
    prepared = prepare_for_grammar(schema, max_string=40, max_items=3)["properties"]
    assert prepared["id"]["maxLength"] == 40 and prepared["code"]["maxLength"] == 6
    assert prepared["tags"]["maxItems"] == 3 and prepared["tags"]["items"]["maxLength"] == 40
    assert "maxLength" not in prepared["state"] and prepared["at"]["format"] == "date-time"
    assert "format" not in prepared["mail"] and prepared["mail"]["maxLength"] == 40
    assert schema == original


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    schema = {"type": "object", "$defs": {
        "Node": {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}}}
    prepared = prepare_for_grammar(schema)
    assert "$defs" not in prepared and "$ref" not in str(prepared)
    assert prepared["properties"]["root"]["properties"]["name"]["type"] == "string"


def test_llama_cpp_converts_every_shipped_output_schema() -> None:
    engine = LlamaEngine("unused.gguf")  # grammars need no model
    for tool in load_catalog([SPECS]).tools.values():
        if tool.output_schema is not None:
            assert engine.schema_support(prepare_for_grammar(tool.output_schema)) is None, tool.name
