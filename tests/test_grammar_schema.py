"""Schemas prepared for grammars: bounded, normalized, and accepted by llama.cpp's real converter."""

from __future__ import annotations

import copy
from pathlib import Path

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
    assert "format" not in prepared["mail"] and prepared["mail"]["pattern"].startswith("^[a-z]")
    assert schema == original


def test_formats_the_converter_ignores_become_patterns_whose_matches_validate() -> None:
    import re

    from jsonschema import Draft202012Validator

    from mcp_sim.grammar_schema import FORMAT_PATTERNS

    samples = {"email": "ann.lee@northwind.com", "hostname": "api.internal.example",
               "ipv4": "10.0.42.7", "uri": "https://docs.example.com/v1/items"}
    for name, pattern in FORMAT_PATTERNS.items():
        assert re.fullmatch(pattern.strip("^$"), samples[name]), name
        validator = Draft202012Validator({"type": "string", "format": name},
                                         format_checker=Draft202012Validator.FORMAT_CHECKER)
        assert validator.is_valid(samples[name]), name


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    schema = {"type": "object", "$defs": {
        "Node": {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#/$defs/Node"}}}},
        "properties": {"root": {"$ref": "#/$defs/Node"}}}
    prepared = prepare_for_grammar(schema)
    assert "$defs" not in prepared and "$ref" not in str(prepared)
    assert prepared["properties"]["root"]["properties"]["name"]["type"] == "string"


def test_a_grammar_llama_cpp_would_reject_is_reported_not_crashed_on(model_path: Path) -> None:
    """Regression: the converter copied a "\\." escape from a pattern into a literal; the sampler then crashed."""
    engine = LlamaEngine(model_path)
    reason = engine.schema_support({"type": "object", "properties": {"host": {"type": "string", "pattern": "^a\\.b$"}},
                                    "required": ["host"]})
    assert reason is not None and "grammar parser rejected" in reason


def test_llama_cpp_parses_the_grammar_of_every_shipped_output_schema(model_path: Path) -> None:
    engine = LlamaEngine(model_path)  # the vocabulary alone is loaded to parse grammars
    for tool in load_catalog([SPECS]).tools.values():
        if tool.output_schema is not None:
            assert engine.schema_support(prepare_for_grammar(tool.output_schema)) is None, tool.name
