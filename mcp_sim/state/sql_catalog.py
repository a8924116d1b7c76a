"""Catalog tools of a SQL server: `list_tables()` and `describe_table(table_name)` are queries of the
database's own catalog, in the server's dialect. `learn` tries each catalog statement on the database as it
stood before each recorded call (the session's statements replayed) and keeps the one that reproduces every
recorded answer, so the tool answers from the world's database like the server's SQL tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp_sim.state.layout import properties
from mcp_sim.state.sql import answer, learn_style, run, statement

# Per dialect: the statement that lists the tables, and the one that describes the table an argument names.
LISTS = {"sqlite": "SELECT name FROM sqlite_master WHERE type='table'", "duckdb": "SHOW TABLES"}
DESCRIBES = {"sqlite": "PRAGMA table_info({%s})", "duckdb": "DESCRIBE {%s}"}


@dataclass(frozen=True)
class CatalogCase:
    """One recorded call of a catalog tool: the database before it (its statements), and the answer."""

    database: list[str]
    arguments: dict[str, Any]
    text: str
    is_error: bool


def candidates(dialect: str, input_schema: dict[str, Any]) -> list[str]:
    """The catalog statements a tool with INPUT_SCHEMA may be: a list without arguments, a describe with
    one text argument."""
    arguments = properties(input_schema)
    if not arguments:
        return [LISTS[dialect]]
    texts = [name for name, shape in arguments.items() if isinstance(shape, dict) and shape.get("type") == "string"]
    return [DESCRIBES[dialect] % texts[0]] if len(arguments) == 1 and texts else []


def reproduces(template: str, dialect: str, cases: Sequence[CatalogCase]) -> bool:
    """Whether TEMPLATE, run on each case's database and written in the style the cases show, gives every
    recorded answer exactly."""
    style = learn_style(((case.arguments, case.text, case.is_error) for case in cases), None, template, dialect)
    for case in cases:
        sql = statement(case.arguments, template, None)
        said = answer(run(case.database, sql, dialect), style) if sql is not None else None
        if said != (case.text, case.is_error):
            return False
    return bool(cases)
