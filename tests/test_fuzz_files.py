"""Every kind of file mcp-sim reads, fuzzed the same way: a bad file is refused with an McpSimError naming it,
never another exception, and the CLI says so in a line or a listing, never a traceback.

Kinds: tool specs, record traces, cassettes (traces read for --replay), fault files, ledgers, model manifests,
OpenAPI documents, Claude Desktop configs, response caches and world stores (SQLite). Cases per kind are
tallied and printed at the end of the module (`-s`); docs/RELIABILITY.md lists them. No model is loaded.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import example, given
from hypothesis import strategies as st

from mcp_sim.base.errors import McpSimError
from mcp_sim.cli import cli
from mcp_sim.core.specs import load_catalog
from mcp_sim.core.worlds import sqlite_store as store_module
from mcp_sim.core.worlds.sqlite_store import SqliteStore
from mcp_sim.core.worlds.world import World
from mcp_sim.models.registry import load_manifest
from mcp_sim.rehearsal import cache_file as cache_module
from mcp_sim.rehearsal.cache import ResponseCache
from mcp_sim.rehearsal.cassettes import Cassette
from mcp_sim.rehearsal.ledger import read_ledger, summarize
from mcp_sim.rehearsal.traces import read_traces, sessions
from mcp_sim.sources.claude_desktop import read_config
from mcp_sim.sources.openapi import import_openapi
from mcp_sim.xsim.faults import load_faults
from tests.conftest import SPECS
from tests.file_fuzz_cases import (
    CLAUDE_CONFIG,
    EXTREMES,
    FAULTS,
    FUZZ,
    LEDGER,
    OPENAPI,
    SPEC,
    SQLITE_FUZZ,
    TRACE,
    bad_manifest,
    bad_text,
    built_database,
    extreme_bytes,
    flipped,
    jsonl,
)

TALLY: dict[str, Counter[str]] = {}
WORK = Path(tempfile.mkdtemp(prefix="mcp-sim-fuzz-files-"))  # hypothesis reruns a test body: no tmp_path


@pytest.fixture(scope="module", autouse=True)
def print_tally() -> Iterator[None]:
    yield
    for kind, counts in sorted(TALLY.items()):
        print(f"\n{kind}: {sum(counts.values())} cases, {counts['rejected']} rejected, {counts['accepted']} accepted")


def outcome(kind: str, load: Callable[[Path], Any], path: Path) -> str:
    """Load PATH: it is accepted, or refused with an McpSimError whose message names it; anything else fails."""
    try:
        load(path)
        result = "accepted"
    except McpSimError as exc:
        assert str(path) in str(exc), f"the error does not name {path}: {exc}"
        result = "rejected"
    TALLY.setdefault(kind, Counter())[result] += 1
    return result


def written(name: str, content: bytes) -> Path:
    path = WORK / name
    path.write_bytes(content)
    return path


# --- the loaders, as the commands use them -------------------------------------------------------------------

def load_trace(path: Path) -> None:
    sessions(read_traces([path], kinds=None))  # sorting by step reads every record's types


def load_ledger(path: Path) -> None:
    summarize(read_ledger(path))


def load_openapi(path: Path) -> None:
    import_openapi(path)


TEXT_KINDS: dict[str, tuple[str, Callable[[Path], Any], bytes, Any, bool]] = {
    # kind: (file name, loader, valid bytes, valid document, one JSON document per line)
    "spec (json)": ("spec.json", lambda p: load_catalog([p]), json.dumps(SPEC).encode(), SPEC, False),
    "spec (yaml)": ("spec.yaml", lambda p: load_catalog([p]), json.dumps(SPEC).encode(), SPEC, False),
    "trace": ("trace.jsonl", load_trace, jsonl(TRACE), TRACE, True),
    "cassette": ("cassette.jsonl", lambda p: Cassette.load([p]), jsonl(TRACE), TRACE, True),
    "fault file": ("faults.yaml", load_faults, json.dumps(FAULTS).encode(), FAULTS, False),
    "ledger": ("ledger.jsonl", load_ledger, jsonl(LEDGER), LEDGER, True),
    "openapi (json)": ("api.json", load_openapi, json.dumps(OPENAPI).encode(), OPENAPI, False),
    "openapi (yaml)": ("api.yaml", load_openapi, json.dumps(OPENAPI).encode(), OPENAPI, False),
    "claude desktop config": ("claude.json", read_config, json.dumps(CLAUDE_CONFIG).encode(), CLAUDE_CONFIG, False),
}


@pytest.mark.parametrize("kind", sorted(TEXT_KINDS))
def test_a_valid_sample_loads(kind: str) -> None:
    name, load, valid, _, _ = TEXT_KINDS[kind]
    assert outcome(kind, load, written(name, valid)) == "accepted"


@pytest.mark.parametrize("kind", sorted(TEXT_KINDS))
def test_a_bad_text_file_is_refused_naming_it(kind: str) -> None:
    name, load, valid, document, lines = TEXT_KINDS[kind]

    @FUZZ
    @given(bad_text(valid, document, lines))
    def check(content: bytes) -> None:
        outcome(kind, load, written(name, content))

    check()


@pytest.mark.parametrize("kind", sorted(TEXT_KINDS))
@pytest.mark.parametrize("extreme", sorted(EXTREMES))
def test_every_extreme_file_is_refused_naming_it(kind: str, extreme: str) -> None:
    name, load, _, _, _ = TEXT_KINDS[kind]
    # An empty ledger or trace holds no calls, an empty config is Claude Desktop's "no servers yet"; the rest
    # need content.
    empty_is_valid = kind in ("ledger", "trace", "claude desktop config") and extreme in ("empty", "whitespace")
    # A UTF-8 byte order mark is dropped (Windows editors write one): what is left, {}, is an empty config.
    bom_is_valid = kind == "claude desktop config" and extreme == "bom"
    expected = "accepted" if empty_is_valid or bom_is_valid else "rejected"
    assert outcome(kind, load, written(name, extreme_bytes(extreme))) == expected


@FUZZ
@given(bad_manifest())
def test_a_bad_model_manifest_is_refused_naming_it(content: bytes) -> None:
    outcome("model manifest", load_manifest, written("model.toml", content))


def test_a_model_manifest_nested_2000_deep_is_refused_naming_it() -> None:
    path = written("model.toml", b"name = " + b"[" * 2000 + b"]" * 2000)
    assert outcome("model manifest", load_manifest, path) == "rejected"


# --- SQLite files --------------------------------------------------------------------------------------------

def valid_cache() -> bytes:
    path = WORK / "valid-cache.db"
    with ResponseCache(path) as cache:
        cache.put("k", b'{"content": [], "isError": false}', model_hash="ab" * 32, model_name="m", tool="t",
                  arguments={"a": 1}, world="w")
        cache._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def valid_store() -> bytes:
    folder = WORK / "valid-store"
    store = SqliteStore(folder)
    world = World("w")
    world.dropped = {"spec.yaml": 1}
    store.save(world)
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return (folder / store_module.DATABASE_NAME).read_bytes()


def fresh(path: Path) -> Path:
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def load_cache(path: Path) -> None:
    with ResponseCache(path, create=False) as cache:
        cache.stats()
        cache.export(WORK / "export.jsonl")
        keys = [row[0] for row in cache._db.execute("SELECT key FROM responses")]
        for key in keys:
            cache.get(key)


def load_store(path: Path) -> None:
    store = SqliteStore(path.parent)
    try:
        for name in store.names():
            store.load(name)
    finally:
        store.close()


CACHE_TABLES = {"responses": ["key", "result", "model_hash", "model_name", "tool", "arguments", "world",
                              "created_at"], "models": ["model_name", "model_hash"],
                "fingerprints": ["path", "size", "mtime_ns", "sha256"]}
SQLITE_KINDS: dict[str, tuple[Path, Callable[[Path], None], Callable[[], bytes], int, dict[str, list[str]]]] = {
    "response cache": (WORK / "cache.db", load_cache, valid_cache, cache_module.APPLICATION_ID, CACHE_TABLES),
    "world store": (WORK / "store" / store_module.DATABASE_NAME, load_store, valid_store,
                    store_module.APPLICATION_ID, store_module.COLUMNS),
}


@pytest.mark.parametrize("kind", sorted(SQLITE_KINDS))
def test_a_bad_sqlite_file_is_refused_naming_it(kind: str) -> None:
    path, load, valid_bytes, _, _ = SQLITE_KINDS[kind]
    valid = valid_bytes()
    assert outcome(kind, load, written_at(fresh(path), valid)) == "accepted"

    @SQLITE_FUZZ
    @given(st.one_of(st.binary(max_size=300), st.binary(max_size=300).map(lambda b: cache_module.SQLITE_HEADER + b),
                     st.integers(1, len(valid) - 1).map(lambda n: valid[:n]), flipped(valid)))
    @example(b"SQLite format 3\x00")
    def check(content: bytes) -> None:
        outcome(kind, load, written_at(fresh(path), content))

    check()


@pytest.mark.parametrize("kind", sorted(SQLITE_KINDS))
def test_an_sqlite_database_of_the_wrong_make_is_refused_naming_it(kind: str) -> None:
    path, load, _, application_id, tables = SQLITE_KINDS[kind]

    @SQLITE_FUZZ
    @given(built_database(application_id, tables))
    def check(build: Callable[[Path], None]) -> None:
        build(fresh(path))
        outcome(kind, load, path)

    check()


def written_at(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


# --- the CLI: one command per kind, exit 1 and the error (a line, or a headline and its listing) -------------

WEATHER = str(SPECS / "weather.yaml")
CALL = ["call", WEATHER, "--tool", "get_weather", "--args", '{"city": "Oslo"}', "--replay-only"]
DEEP_LINE = extreme_bytes("deep list") + b"\n"


def damaged_store(folder: Path, change: str) -> Path:
    store = SqliteStore(folder)
    store.save(World("default"))
    store.close()
    with sqlite3.connect(folder / store_module.DATABASE_NAME) as db:
        db.execute(change)
    return folder / store_module.DATABASE_NAME


CLI_CASES: dict[str, tuple[str, bytes, list[str]]] = {
    # kind: (file name, content, the command line; FILE is the bad file's path)
    "spec": ("spec.json", extreme_bytes("huge integer"), ["check", "FILE"]),
    "trace": ("trace.jsonl", DEEP_LINE, ["learn", "FILE", "--spec", WEATHER, "--out", str(WORK / "out.yaml")]),
    "cassette": ("cassette.jsonl", b'{"session": 1}\n', [*CALL, "--replay", "FILE"]),
    "fault file": ("faults.yaml", extreme_bytes("deep yaml"), [*CALL, "--faults", "FILE"]),
    "ledger": ("ledger.jsonl", DEEP_LINE, ["ledger", "FILE"]),
    "openapi": ("api.json", extreme_bytes("huge integer"),
                ["import", "openapi", "FILE", "--out", str(WORK / "o.yaml")]),
    "claude desktop config": ("claude.json", DEEP_LINE, ["install", "claude-desktop", WEATHER, "--config", "FILE"]),
    "response cache (stats)": ("cache.db", b"SQLite format 3\x00" + b"\xff" * 100, ["cache", "stats", "FILE"]),
    "response cache (call)": ("cache.db", b"not a database", [*CALL, "--cache", "FILE"]),
    "model manifest": ("models/bad.toml", b"name = \xff", ["models", "list"]),
}


def assert_clean_failure(args: list[str], path: Path) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output and str(path) in result.output
    headline, *listing = result.output.strip().splitlines()
    assert all(line.startswith("  - ") for line in listing), result.output
    assert headline.startswith("Error: ") or "problem(s)" in headline, headline


@pytest.mark.parametrize("kind", sorted(CLI_CASES))
def test_the_cli_names_a_bad_file_in_one_error_without_a_traceback(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    name, content, args = CLI_CASES[kind]
    path = fresh(WORK / "cli" / name)
    path.write_bytes(content)
    monkeypatch.setenv("MCP_SIM_MODELS_DIR", str(path.parent))
    assert_clean_failure([str(path) if arg == "FILE" else arg for arg in args], path)


@pytest.mark.parametrize("change", ["ALTER TABLE turns DROP COLUMN observation", "PRAGMA user_version = 7"])
def test_call_with_a_world_store_of_the_wrong_make_names_it_without_a_traceback(change: str) -> None:
    folder = WORK / "cli-store"
    fresh(folder / store_module.DATABASE_NAME)
    assert_clean_failure([*CALL, "--state-dir", str(folder)], damaged_store(folder, change))


@pytest.mark.parametrize("change", ["UPDATE worlds SET calls = 'many'", "UPDATE worlds SET dropped = '[[['"])
def test_call_in_a_damaged_stored_world_is_an_error_result_naming_the_store(change: str) -> None:
    # The store opens; the world's row is read at the call, which then fails as a tool failure (stage "world").
    folder = WORK / "cli-store"
    fresh(folder / store_module.DATABASE_NAME)
    path = damaged_store(folder, change)
    result = CliRunner().invoke(cli, [*CALL, "--state-dir", str(folder)])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    answer = json.loads(result.output)
    assert answer["isError"] is True and answer["_meta"]["mcp-sim/simulation"]["stage"] == "world"
    assert f"the world store {path} is damaged" in answer["content"][0]["text"]


def test_a_real_process_reading_a_bad_ledger_prints_one_line_and_no_traceback() -> None:
    import subprocess
    import sys

    path = written("real.jsonl", DEEP_LINE)
    done = subprocess.run([sys.executable, "-m", "mcp_sim", "ledger", str(path)], capture_output=True, text=True,
                          timeout=60, cwd=SPECS.parent)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"Error: {path} line 1: not a ledger entry (not a JSON line); "
                                                "is this a file written by --ledger?"]
