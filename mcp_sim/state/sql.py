"""`op: sql`: tools that take SQL (`read_query(query)`, `write_query(query)`, `create_table(query)`) answered by
running the statement on the world's own database, so rows inserted are the rows selected.

The database is the world's: its live data holds it as SQL text (`world.data.<collection>`, a list of
statements such as sqlite's own dump), and each call runs on a private in-memory SQLite built from that text.
No file, extension or other database can be reached (an authorizer refuses ATTACH, and extensions stay off),
and a runaway statement is stopped after a fixed amount of work: this emulates the real server's database,
it does not run the real tool.

How an answer looks is learned from the tool's own examples, not assumed: rows as JSON or as Python's
`[{'name': 'Widget'}]`, a write as `[{'affected_rows': 2}]`, a table made as "Table created successfully",
a failure as "Database error: no such table: x" (flagged an error or not, as the example was).
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp_sim.state import sql_duckdb
from mcp_sim.state.sql_outcome import Outcome

# Virtual machine steps between checks, and the checks a statement may take (about 10 million steps).
_PROGRESS_STEPS = 10_000
_MAX_CHECKS = 1_000
_READS = re.compile(r"^\s*(select|with|pragma|explain)\b", re.IGNORECASE)
_DDL = re.compile(r"^\s*(create|drop|alter)\b", re.IGNORECASE)
_PLACE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Style:
    """How a tool's answers look, from its examples."""

    rows: str = "json"  # "json", "python" (dicts) or "tuples" (DuckDB's rows as Python prints them)
    count_field: str | None = None  # a write answers [{<count_field>: n}]
    done_text: str | None = None  # a schema change answers this
    error_prefix: str | None = None  # a failure answers this + sqlite's message
    error_flag: bool = True  # ... flagged isError, or not


def statement(arguments: dict[str, Any], template: str | None, argument: str | None) -> str | None:
    """The SQL this call runs: the effect's fixed statement with arguments filled in as quoted names
    (`PRAGMA table_info({table_name})`), else the statement argument."""
    if template is not None:
        names = _PLACE.findall(template)
        if any(not isinstance(arguments.get(name), str) for name in names):
            return None
        return _PLACE.sub(lambda m: '"' + str(arguments[m.group(1)]).replace('"', '""') + '"', template)
    value = arguments.get(argument) if argument else None
    return value if isinstance(value, str) else None


def is_read(sql: str, dialect: str = "sqlite") -> bool:
    return sql_duckdb.is_read(sql) if dialect == "duckdb" else _READS.match(sql) is not None


def run(dump: Iterable[str], sql: str, dialect: str = "sqlite") -> Outcome:
    """Run SQL on a private copy of the database DUMP holds, on the engine of DIALECT."""
    return sql_duckdb.run(dump, sql) if dialect == "duckdb" else _run_sqlite(dump, sql)


def _run_sqlite(dump: Iterable[str], sql: str) -> Outcome:
    connection = _sandbox()
    try:
        connection.executescript("\n".join(dump))
        before = connection.total_changes
        cursor = connection.execute(sql)
        if cursor.description is not None:  # a query: its rows, and the database as it was
            columns = [column[0] for column in cursor.description]
            return Outcome(rows=[dict(zip(columns, row, strict=True)) for row in cursor.fetchall()])
        changed = connection.total_changes - before
        ddl = _DDL.match(sql) is not None
        return Outcome(changed=None if ddl else changed, ddl=ddl, dump=_dump(connection))
    except (sqlite3.Error, sqlite3.Warning) as exc:  # a Warning: more than one statement
        return Outcome(error=str(exc))
    finally:
        connection.close()


def learn_style(examples: Iterable[tuple[dict[str, Any], Any, bool]], argument: str | None,
                template: str | None, dialect: str = "sqlite") -> Style:
    """The answer style the examples (arguments, result text, is_error) show. Rows the examples do not
    show are printed as the dialect's servers mostly do: JSON for SQLite's, Python tuples (DB-API's
    fetchall) for DuckDB's."""
    rows, count_field, done, prefix, flag = "tuples" if dialect == "duckdb" else "json", None, None, None, True
    for arguments, result, is_error in examples:
        if not isinstance(result, str):
            continue
        sql = statement(arguments, template, argument)
        if sql is not None:
            failed = run([], sql, dialect).error
            # It fails the same on an empty database (the first line: DuckDB's hints name other tables).
            at = result.find(failed.splitlines()[0]) if failed else -1
            if failed is not None and at >= 0:
                prefix, flag = result[:at], is_error
                continue
        if is_error:
            continue
        value = _literal(result)
        if isinstance(value, list) and result.lstrip().startswith("[{'"):
            rows = "python"
        if result.lstrip().startswith("[("):  # DuckDB's rows (Decimal('1.50') is no literal: the shape says)
            rows = "tuples"
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) and len(value[0]) == 1:
            (name, count), = value[0].items()
            if isinstance(count, int) and sql is not None and not is_read(sql, dialect):
                count_field = name
        if value is None and sql is not None and _DDL.match(sql) and not any(c.isdigit() for c in result):
            done = result
    return Style(rows, count_field, done, prefix, flag)


def answer(outcome: Outcome, style: Style) -> tuple[str, bool] | None:
    """The answer text and its error flag, or None when the examples do not show how it looks."""
    if outcome.error is not None:
        if style.error_prefix is None:
            return None
        return style.error_prefix + outcome.error, style.error_flag
    if outcome.rows is not None:
        if style.rows == "tuples":
            tuples = outcome.tuples if outcome.tuples is not None else [tuple(row.values()) for row in outcome.rows]
            return str(tuples), False
        return _rows(outcome.rows, style.rows), False
    if outcome.ddl:
        return (style.done_text, False) if style.done_text is not None else None
    if style.count_field is not None and outcome.changed is not None:
        return _rows([{style.count_field: outcome.changed}], style.rows), False
    return None


def _rows(rows: list[dict[str, Any]], style: str) -> str:
    # default=str: a DuckDB date or decimal prints as its text rather than failing the call.
    return str(rows) if style == "python" else json.dumps(rows, ensure_ascii=False, default=str)


def _literal(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _sandbox() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", isolation_level=None)
    checks = [0]

    def progress() -> int:
        checks[0] += 1
        return 1 if checks[0] > _MAX_CHECKS else 0  # non-zero interrupts the statement

    def authorize(action: int, *_: Any) -> int:
        return sqlite3.SQLITE_DENY if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH) else sqlite3.SQLITE_OK

    connection.set_progress_handler(progress, _PROGRESS_STEPS)
    connection.set_authorizer(authorize)
    return connection


def _dump(connection: sqlite3.Connection) -> list[str]:
    return [line for line in connection.iterdump() if line not in ("BEGIN TRANSACTION;", "COMMIT;")]
