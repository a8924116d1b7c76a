"""What one SQL statement did, in any dialect (state.sql for SQLite, state.sql_duckdb for DuckDB)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What a statement did: rows (a query), a count of changed rows (a write), a schema change, or a
    failure; and the database after it (None when unchanged)."""

    rows: list[dict[str, Any]] | None = None
    changed: int | None = None
    ddl: bool = False
    error: str | None = None
    dump: list[str] | None = None
    # The rows exactly as the engine gave them, for an answer that prints them as Python tuples.
    tuples: list[tuple[Any, ...]] | None = None
