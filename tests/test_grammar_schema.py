"""Schemas prepared for grammars: bounded, normalized, and accepted by llama.cpp's real converter."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_sim.base.grammar_schema import prepare_for_grammar
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.sources.openapi import import_openapi
from tests.conftest import REPO, SPECS
from tests.grammar_check import GrammarChecker


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

    from mcp_sim.base.grammar_schema import FORMAT_PATTERNS

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


@pytest.mark.parametrize("pinned", ['{"debug": false, "port": 8080}', "line one\nline two", "C:\\temp\\a.txt"])
def test_a_pinned_string_with_quotes_newlines_or_backslashes_admits_exactly_itself(pinned: str,
                                                                                    grammars: GrammarChecker) -> None:
    """Regression: llama-cpp-python's converter left backslashes unescaped in literals, so a const holding a
    quote (a pinned file's JSON content) was rejected by llama.cpp's parser, and one holding a newline asked
    for a raw newline inside a JSON string."""
    schema = {"type": "object", "properties": {"content": {"type": "string", "const": pinned}}, "required": ["content"]}
    assert grammars.accepts(schema, json.dumps({"content": pinned}))
    assert not grammars.accepts(schema, json.dumps({"content": pinned + "x"}))


# What an OpenAPI newcomer imports first: Item is allOf [NewItem, {id}].
NEW_ITEM = {"type": "object", "required": ["name", "quantity"], "properties": {
    "name": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}}}}
ITEM_ID = {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}
OAS_EXAMPLES = REPO / "node_modules" / "@readme" / "oas-examples" / "3.0" / "json"


@pytest.fixture(scope="module")
def grammars(model_path: Path) -> Iterator[GrammarChecker]:
    checker = GrammarChecker(model_path)
    yield checker
    checker.close()


@pytest.mark.parametrize("parent", [{}, {"type": "object"}])
def test_allof_is_merged_so_the_grammar_asks_for_every_required_field(parent: dict[str, Any],
                                                                      grammars: GrammarChecker) -> None:
    """Regression: with the parent typed object, the grammar allowed any string-valued object (createItem then
    failed with "'quantity' is a required property"); each member was closed with additionalProperties: false,
    which no instance can satisfy."""
    item = {**parent, "allOf": [{"$ref": "#/$defs/NewItem"}, ITEM_ID], "$defs": {"NewItem": NEW_ITEM}}
    prepared = prepare_for_grammar(item)
    assert "allOf" not in json.dumps(prepared) and prepared["required"] == ["name", "quantity", "id"]
    answer = '{"name": "pen", "quantity": 3, "id": "i-1", "price": 1.5}'
    assert grammars.accepts(prepared, answer) and validation_error(json.loads(answer), item) is None
    assert validation_error(json.loads(answer), prepared) is None
    assert not grammars.accepts(prepared, '{"name": "pen", "id": "i-1"}')  # quantity is required


def test_properties_beside_oneof_are_kept_in_every_branch(grammars: GrammarChecker) -> None:
    """llama.cpp's converter reads only the oneOf of {properties, oneOf}: the shared properties are merged in."""
    schema = {"type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}},
              "oneOf": [{"required": ["cat"], "properties": {"cat": {"type": "boolean"}}},
                        {"required": ["dog"], "properties": {"dog": {"type": "integer"}}}]}
    prepared = prepare_for_grammar(schema)
    assert [branch["required"] for branch in prepared["anyOf"]] == [["kind", "cat"], ["kind", "dog"]]
    assert grammars.accepts(prepared, '{"kind": "dog", "dog": 2}')
    assert not grammars.accepts(prepared, '{"dog": 2}')


@pytest.mark.parametrize("document", ["petstore-expanded.json", "discriminators.json", "polymorphism.json",
                                      "complex-nesting.json", "response-schemas.json"])
def test_composed_schemas_of_real_documents_give_grammars_that_admit_valid_answers(
        document: str, grammars: GrammarChecker) -> None:
    """Every allOf/oneOf/anyOf schema an import of these documents holds (output and input alike): the grammar
    admits an answer that the schema as written accepts."""
    tools = import_openapi(OAS_EXAMPLES / document).document["tools"]
    schemas = [tool[key] for tool in tools for key in ("inputSchema", "outputSchema")
               if any(word in json.dumps(tool.get(key)) for word in ("allOf", "oneOf", "anyOf"))]
    assert schemas, f"{document} has no composed schema"
    for schema in schemas:
        prepared = prepare_for_grammar(schema)
        assert "allOf" not in json.dumps(prepared)
        answer = minimal_instance(prepared)
        assert validation_error(answer, prepared) in (None,) or "valid under each of" in str(
            validation_error(answer, prepared)), (answer, prepared)
        assert grammars.accepts(prepared, json.dumps(answer)), (answer, prepared)
        problem = validation_error(answer, schema)
        # A oneOf whose branches overlap is the document's own ambiguity; anything else is a grammar fault.
        assert problem is None or "valid under each of" in problem, (problem, answer, schema)


def minimal_instance(schema: dict[str, Any]) -> Any:
    """The smallest answer the prepared SCHEMA allows: required properties only, first branches, first values."""
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return minimal_instance(schema[key][0])
    if "const" in schema or "enum" in schema:
        return schema.get("const", (schema.get("enum") or [None])[0])
    kind = schema.get("type", "object")
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: minimal_instance(properties.get(name, {"type": "string"}))
                for name in schema.get("required", []) if name in properties}
    if kind == "array":
        return [minimal_instance(schema.get("items", {"type": "string"})) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "a" * max(schema.get("minLength", 0), 1) if "pattern" not in schema else "2024-01-01"
    return {"integer": schema.get("minimum", 0), "number": schema.get("minimum", 0), "boolean": True,
            "null": None}[kind]
