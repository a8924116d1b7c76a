"""Spec files that used to slip through or crash the loader: deep nesting, and $refs that point nowhere."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from mcp_sim.base.errors import SpecError
from mcp_sim.cli import cli
from mcp_sim.core.specs import MAX_NESTING, MAX_VALUES, load_catalog, unresolvable_refs, validation_error


def tool_with(input_schema: Mapping[str, object], **extra: object) -> dict[str, object]:
    return {"name": "lookup", "inputSchema": input_schema, **extra}


def write(tmp_path: Path, name: str, document: object) -> Path:
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_catalog([path])
    return caught.value.problems


# --- nesting ---------------------------------------------------------------------------------------------

DEEP_5000 = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("name, text", [
    ("deep.yaml", f"name: lookup\ninputSchema: {DEEP_5000}\n"),
    ("deep.json", f'{{"name": "lookup", "inputSchema": {DEEP_5000}}}'),
])
def test_check_on_a_spec_nested_5000_levels_says_so_without_a_traceback(tmp_path: Path, name: str, text: str) -> None:
    path = write(tmp_path, name, text)
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)
    assert f"{path}: nested deeper than {MAX_NESTING} levels" in result.output


def nested_list(levels: int) -> object:
    return json.loads("[" * levels + "]" * levels)


def test_the_nesting_limit_counts_every_container_of_the_file(tmp_path: Path) -> None:
    # The document and "world" are two levels: data nested limit-2 deep just fits.
    fits = {"world": {"data": nested_list(MAX_NESTING - 2)}, "tools": [tool_with({"type": "object"})]}
    assert list(load_catalog([write(tmp_path, "fits.json", fits)]).tools) == ["lookup"]
    too_deep = {"world": {"data": nested_list(MAX_NESTING - 1)}, "tools": [tool_with({"type": "object"})]}
    path = write(tmp_path, "too_deep.json", too_deep)
    assert problems_of(path) == [f"{path}: nested deeper than {MAX_NESTING} levels; a tool spec needs far fewer "
                                 "(flatten it)"]


def test_a_billion_laughs_of_yaml_aliases_is_refused_not_expanded(tmp_path: Path) -> None:
    # 41 short lines that stand for 2**40 values: expanding them (json.dumps, the prompt) would never finish.
    lines = ["world:", "  data:", "    l0: &l0 [leaf]"]
    lines += [f"    l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 41)]
    lines += ["tools:", "  - {name: lookup, inputSchema: {type: object}}"]
    path = write(tmp_path, "aliases.yaml", "\n".join(lines))
    assert problems_of(path) == [f"{path}: expands to more than {MAX_VALUES:,} values once its YAML aliases "
                                 "(*name) are expanded; write the data out or cut it down"]


def test_a_yaml_alias_cycle_is_refused_as_too_deep(tmp_path: Path) -> None:
    path = write(tmp_path, "cycle.yaml", "world: {data: &loop [*loop]}\ntools: [{name: lookup, inputSchema: {}}]")
    assert problems_of(path) == [f"{path}: nested deeper than {MAX_NESTING} levels; a tool spec needs far fewer "
                                 "(flatten it)"]


# --- $ref ------------------------------------------------------------------------------------------------


def test_a_ref_that_points_nowhere_fails_check_with_file_and_pointer(tmp_path: Path) -> None:
    path = write(tmp_path, "nowhere.json", tool_with({"type": "object", "properties": {"q": {"$ref": "#/nowhere"}}}))
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1
    assert f"{path}# (tool 'lookup')/inputSchema/properties/q/$ref: '#/nowhere' points nowhere" in result.output


def test_every_ref_of_input_and_output_schemas_is_resolved_used_or_not(tmp_path: Path) -> None:
    output = {"type": "object", "properties": {"hit": {"$ref": "#/$defs/hit"}},
              "$defs": {"hit": {"type": "string"}, "unused": {"items": {"$ref": "#/$defs/gone"}}}}
    document = {"tools": [tool_with({"type": "object", "properties": {"a/b": {"$ref": "#/$defs/missing"}}},
                                    outputSchema=output)]}
    path = write(tmp_path, "refs.json", document)
    assert problems_of(path) == [
        f"{path}#/tools/0 (tool 'lookup')/inputSchema/properties/a~1b/$ref: '#/$defs/missing' points nowhere in "
        "this schema; define the target (e.g. under $defs) or fix the pointer",
        f"{path}#/tools/0 (tool 'lookup')/outputSchema/$defs/unused/items/$ref: '#/$defs/gone' points nowhere in "
        "this schema; define the target (e.g. under $defs) or fix the pointer",
    ]


def test_an_example_is_not_blamed_for_its_schemas_broken_ref(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"q": {"$ref": "#/nowhere"}}}
    path = write(tmp_path, "example.json", tool_with(schema, **{"x-sim": {"examples": [
        {"arguments": {"q": 1}, "result": "text"}]}}))
    problems = problems_of(path)
    assert len(problems) == 1 and "inputSchema/properties/q/$ref" in problems[0]


@pytest.mark.parametrize("ref, names", [("http://127.0.0.1:9/schema.json", "a URL"),
                                        ("other.json#/$defs/x", "another file")])
def test_refs_outside_the_file_are_refused(tmp_path: Path, ref: str, names: str) -> None:
    path = write(tmp_path, "remote.json", tool_with({"type": "object", "properties": {"q": {"$ref": ref}}}))
    (problem,) = problems_of(path)
    assert f"/inputSchema/properties/q/$ref: {ref!r} names {names}, which mcp-sim never fetches" in problem


def test_valid_refs_of_every_kind_pass() -> None:
    schema = {
        "type": "object",
        "properties": {
            "local": {"$ref": "#/$defs/text"},
            "anchor": {"$ref": "#word"},
            "metaschema": {"$ref": "https://json-schema.org/draft/2020-12/schema"},  # bundled, not fetched
            "embedded": {"$id": "urn:example:inner", "$defs": {"n": {"type": "integer"}},
                         "properties": {"x": {"$ref": "#/$defs/n"}}},
            "data": {"const": {"$ref": "#/nowhere"}, "enum": [{"$ref": "#/nowhere"}]},  # values, not references
        },
        "$defs": {"text": {"type": "string"}, "word": {"$anchor": "word", "type": "string"}},
    }
    assert unresolvable_refs(schema) == []
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"a": {"$ref": "#/definitions/a"}, "b": {"$ref": "#/definitions/b"}},
              "definitions": {"a": {"type": "string"}}}
    assert unresolvable_refs(draft7) == [("/properties/b", "'#/definitions/b' points nowhere in this schema; "
                                                           "define the target (e.g. under $defs) or fix the pointer")]


class CountingHandler(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[str]:
    """A real loopback HTTP server that would serve any schema asked for, and counts the asks."""
    CountingHandler.hits = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    finally:
        server.shutdown()
        server.server_close()


def test_nothing_is_fetched_at_load_or_when_validating_arguments(tmp_path: Path, schema_host: str) -> None:
    schema = {"type": "object", "properties": {"q": {"$ref": schema_host}}}
    (problem,) = problems_of(write(tmp_path, "remote.json", tool_with(schema)))
    assert "names a URL, which mcp-sim never fetches" in problem
    # jsonschema's default registry would fetch it here (with a warning); the simulator's validation must not.
    assert "cannot be resolved" in (validation_error({"q": "x"}, schema) or "")
    assert CountingHandler.hits == 0
