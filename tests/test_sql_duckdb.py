"""SQL of another dialect: a DuckDB server's world runs its statements on an in-memory DuckDB, in the
answer format its examples show. The proof is the real mcp-server-duckdb's recorded sessions
(tool_specs/fidelity/duckdb*.jsonl): its spec, as mirror and learn wrote it, answers them from the state."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from mcp_sim.base.errors import SpecError
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.mirror import MirroredServer, spec_document
from mcp_sim.state import sql_duckdb
from mcp_sim.state.sql import Style, answer, run
from tests.scripted import ScriptedEngine

FIDELITY = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"
QUERY = {"name": "query", "description": "Execute a query on the database",
         "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}


def test_the_recorded_duckdb_sessions_are_answered_from_the_world_database() -> None:
    engine = ScriptedEngine(*["(the model)"] * 10)
    simulator = Simulator(load_catalog([FIDELITY / "duckdb.yaml"]), engine, SimOptions())
    exact, sources = 0, []
    lines = (FIDELITY / "duckdb.jsonl").read_text().splitlines()
    for line in lines:
        record = json.loads(line)
        result = simulator.simulate("query", record["arguments"], world=record["session"])
        sources.append(result.meta[META_KEY]["source"])
        exact += result.text == record["result"]["content"][0]["text"]
    # SHOW TABLES, DESCRIBE, ALTER TABLE ... ADD COLUMN, inserts as [(n,)], dates, and the failures in the
    # server's words (its example shows one: "Database error: " before DuckDB's own message): all as the
    # real server said, with no model.
    assert len(lines) == 42 and exact == 42 and set(sources) == {"state"}


def test_the_database_is_private_and_a_runaway_statement_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    for escape in ("COPY (SELECT 1) TO '/tmp/mcp-sim-duckdb-out.csv'", "ATTACH '/tmp/mcp-sim-other.duckdb'",
                   "SELECT * FROM read_csv('/etc/passwd')"):
        outcome = run([], escape, "duckdb")
        assert outcome.error is not None and "disabled by configuration" in outcome.error
    assert not Path("/tmp/mcp-sim-duckdb-out.csv").exists()
    monkeypatch.setattr(sql_duckdb, "TIME_LIMIT_S", 0.5)
    started = time.monotonic()
    outcome = run([], "SELECT count(*) FROM range(100000000) a, range(100000000) b", "duckdb")
    assert outcome.error is not None and "INTERRUPT" in outcome.error.upper()
    assert time.monotonic() - started < 5


def test_writes_replay_and_reads_leave_the_log_alone() -> None:
    made = run([], "CREATE TABLE t (id INTEGER, price DECIMAL(5, 2))", "duckdb")
    assert made.dump == ["CREATE TABLE t (id INTEGER, price DECIMAL(5, 2))"] and made.rows == []
    log = [*made.dump, "INSERT INTO t VALUES (1, 1.5)"]
    read = run(log, "SELECT * FROM t", "duckdb")
    assert read.dump is None  # a read changes nothing
    assert answer(read, Style(rows="tuples")) == ("[(1, Decimal('1.50'))]", False)  # as DuckDB's Python prints
    assert run(log, "DESCRIBE t", "duckdb").dump is None
    # Rows printed as JSON (a spec whose examples say so) take DuckDB's dates and decimals as text.
    dated = run([], "SELECT DATE '2026-01-05' AS day, 1.5::DECIMAL(3, 1) AS n", "duckdb")
    assert answer(dated, Style(rows="json")) == ('[{"day": "2026-01-05", "n": "1.5"}]', False)


def test_mirror_names_the_dialect_and_a_wrong_one_is_refused(tmp_path: Path) -> None:
    duck = spec_document(MirroredServer("mcp-duckdb-server", "1.0", None, [QUERY]))
    assert duck["tools"][0]["x-sim"]["state"] == {"collection": "database", "op": "sql", "dialect": "duckdb"}
    postgres = spec_document(MirroredServer("db", None, "A PostgreSQL database, read and written.", [QUERY]))
    assert postgres["tools"][0]["x-sim"]["state"]["dialect"] == "duckdb"  # DuckDB reads Postgres's SQL
    plain = spec_document(MirroredServer("sqlite", None, None, [QUERY]))
    assert "dialect" not in plain["tools"][0]["x-sim"]["state"]
    duck["tools"][0]["x-sim"]["state"]["dialect"] = "oracle"
    spec = tmp_path / "oracle.yaml"
    spec.write_text(yaml.safe_dump(duck))
    with pytest.raises(SpecError, match="dialect: must be one of sqlite, duckdb, got 'oracle'"):
        load_catalog([spec])
