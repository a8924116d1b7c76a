"""Bad files for test_fuzz_files.py: one valid sample per kind of file mcp-sim reads, and hypothesis strategies
that break it (random bytes, truncation, wrong shapes, wrong types in the right shape, extremes), plus SQLite
files built wrong (foreign tables, wrong columns, wrong user_version, rows of the wrong types)."""

from __future__ import annotations

import copy
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from mcp_sim.rehearsal.ledger import LedgerEntry
from mcp_sim.rehearsal.traces import TraceRecord

FUZZ = settings(deadline=None, derandomize=True, database=None, print_blob=False, max_examples=100,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
SQLITE_FUZZ = settings(FUZZ, max_examples=60)

# --- valid samples -------------------------------------------------------------------------------------------

SPEC = {"tools": [{"name": "get_weather", "description": "Weather now.",
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                   "x-sim": {"examples": [{"arguments": {"city": "Oslo"}, "result": "cloudy"}]}}],
        "world": {"description": "A town.", "data": {"cities": ["Oslo"]}}}
TRACE = json.loads(TraceRecord("s1", 1, "get_weather", {"city": "Oslo"},
                               {"content": [{"type": "text", "text": "cloudy"}], "isError": False}, False,
                               12.5, "weather", "2026-01-01T00:00:00Z").to_json())
LEDGER = json.loads(LedgerEntry(world="w", tool="book", arguments={"id": 1}, is_error=False, result="ok",
                                destructive=True, faults=["latency"], latency_ms=3.0).model_dump_json())
FAULTS = {"faults": [{"tool": "get_weather", "kind": "error", "probability": 0.5, "message": "down"},
                     {"tool": "get_*", "kind": "latency", "nth": 2, "ms": 10}]}
OPENAPI = {"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
           "paths": {"/pets/{id}": {"get": {"operationId": "getPet", "parameters": [
               {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
               "responses": {"200": {"description": "A pet", "content": {"application/json": {"schema": {
                   "type": "object", "properties": {"name": {"type": "string"}}}}}}}}}}}
CLAUDE_CONFIG = {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}, "theme": "dark"}
MANIFEST = (Path(__file__).resolve().parent.parent / "models" / "smollm2-135m.toml").read_text(encoding="utf-8")


def jsonl(document: dict[str, Any]) -> bytes:
    return (json.dumps(document) + "\n" + json.dumps(document) + "\n").encode()


# --- text files ----------------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)

# Each extreme is one file body; `{}` is where it goes into the sample (a JSON value's place).
DEEP = 100_000
EXTREMES: dict[str, str] = {
    "empty": "", "whitespace": " \n\t\n", "nul bytes": "\x00" * 64, "bom": "\ufeff{}",
    "deep list": "[" * DEEP + "]" * DEEP,
    "deep object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "deep yaml": "a:\n" + "".join(" " * i + "- \n" for i in range(1, 2000)),
    "huge integer": "1" * 5000, "huge float": "1e999", "negative huge float": "-1e999", "nan": "NaN",
    "long string": '"' + "x" * 2_000_000 + '"',
    "yaml bomb": "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                 "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                 "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
    "yaml python tag": "!!python/object/apply:os.system ['true']",
    "unhashable key": "? [a]\n: 1\n",
    "invalid utf-8": "\udcff",  # written with surrogateescape: a lone 0xff byte
}


def extreme_bytes(name: str) -> bytes:
    return EXTREMES[name].encode("utf-8", "surrogateescape")


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """The document with one value (at any depth) replaced by another JSON value, or removed."""
    document = copy.deepcopy(document)
    node = document
    while isinstance(node, (dict, list)) and node:
        key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node))))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        if draw(st.integers(0, 4)) == 0:
            del node[key]
        else:
            node[key] = draw(JSON_VALUES)
        break
    return document


def bad_text(valid: bytes, document: Any, lines: bool = False) -> st.SearchStrategy[bytes]:
    """Bytes that may not be a valid file of this kind: random, truncated, wrong shape, wrong types."""
    def encode(value: Any) -> bytes:
        text = json.dumps(value)
        return (text + "\n" if lines else text).encode()

    return st.one_of(
        st.binary(max_size=200),
        st.integers(0, max(len(valid) - 1, 0)).map(lambda n: valid[:n]),
        JSON_VALUES.map(encode),
        mutated(document).map(encode),
        st.sampled_from(sorted(EXTREMES)).map(extreme_bytes),
        # An extreme value in a valid shape: in place of one field of the document.
        st.tuples(mutated(document), st.sampled_from(["huge integer", "deep list", "huge float", "nan"])).map(
            lambda pair: json.dumps(pair[0]).replace("null", EXTREMES[pair[1]], 1).encode()),
    )


TOML_VALUES = ["1", "-1", "1.5", "true", '"text"', "[]", "[1, 2]", "{}", '{a = 1}', "1979-05-27T07:32:00Z",
               '"' + "x" * 5000 + '"', "9" * 30, "inf", "nan", "[" * 50 + "]" * 50]
# Deeper nesting has a test of its own: test_a_model_manifest_nested_2000_deep_is_refused_naming_it.


@st.composite
def bad_manifest(draw: st.DrawFn) -> bytes:
    """A model manifest with one `key = value` line given another value, or random bytes, or cut short."""
    choice = draw(st.integers(0, 3))
    if choice == 0:
        return draw(st.binary(max_size=200))
    if choice == 1:
        return MANIFEST.encode()[:draw(st.integers(0, len(MANIFEST) - 1))]
    lines = MANIFEST.splitlines()
    assignments = [i for i, line in enumerate(lines) if re.match(r"^\w+ = ", line)]
    index = draw(st.sampled_from(assignments))
    value = draw(st.sampled_from(TOML_VALUES) if choice == 2 else st.text(max_size=20))
    lines[index] = lines[index].split(" = ")[0] + " = " + value
    return "\n".join(lines).encode("utf-8", "surrogatepass")


# --- SQLite files --------------------------------------------------------------------------------------------

SQL_VALUES = st.none() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=30) \
    | st.binary(max_size=30)


def flipped(valid: bytes) -> st.SearchStrategy[bytes]:
    """The valid file with a few bytes overwritten past the header (damaged pages)."""
    def flip(edits: list[tuple[int, int]]) -> bytes:
        data = bytearray(valid)
        for offset, value in edits:
            data[offset % len(data)] = value
        return bytes(data)
    return st.lists(st.tuples(st.integers(16, len(valid) * 4), st.integers(0, 255)), min_size=1, max_size=8).map(flip)


@st.composite
def built_database(draw: st.DrawFn, application_id: int, tables: dict[str, list[str]]) -> Callable[[Path], None]:
    """A recipe for an SQLite file: foreign tables, ours with other columns, another user_version, or ours with
    rows whose columns hold the wrong types."""
    kind = draw(st.sampled_from(["foreign", "wrong columns", "user_version", "bad rows"]))
    app_id = application_id if kind != "foreign" else draw(st.sampled_from([0, 1, application_id]))
    version = draw(st.integers(-(2**31), 2**31 - 1)) if kind == "user_version" else 1
    layout = dict(tables)
    if kind == "foreign":
        layout = {draw(st.sampled_from(["notes", "t", "sqlite_stat"])): ["a", "b"]}
    elif kind == "wrong columns":
        table = draw(st.sampled_from(sorted(tables)))
        columns = list(tables[table])
        del columns[draw(st.integers(0, len(columns) - 1))]
        layout[table] = columns + draw(st.lists(st.sampled_from(["extra", "other"]), max_size=1, unique=True))
    rows = {table: draw(st.lists(st.lists(SQL_VALUES, min_size=len(columns), max_size=len(columns)),
                                 min_size=1, max_size=3)) if kind == "bad rows" else []
            for table, columns in layout.items()}

    def build(path: Path) -> None:
        db = sqlite3.connect(path)
        with db:
            for table, columns in layout.items():
                if table.startswith("sqlite_"):
                    db.execute("ANALYZE")
                    continue
                db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
                db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})", rows[table])
        db.execute(f"PRAGMA application_id = {app_id}")
        db.execute(f"PRAGMA user_version = {version}")
        db.close()

    build.__qualname__ = f"database({kind}, application_id={app_id:#x}, user_version={version}, {layout}, {rows})"
    return build
