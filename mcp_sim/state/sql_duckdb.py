"""The DuckDB dialect of `op: sql`: a world whose server speaks DuckDB (or Postgres-flavoured SQL: `SHOW
TABLES`, `DESCRIBE t`, `ALTER TABLE ... ADD COLUMN`) runs its statements on an in-memory DuckDB.

DuckDB has no dump a new database reads back, so the world's database is the log of the statements that
changed it, replayed into a fresh in-memory database for each call. File access is off (no COPY, ATTACH or
read_csv reaches the disk) and a statement is interrupted after a time limit: this emulates the real
server's database, it does not run the real tool. Every statement answers rows, as DuckDB's Python API
gives them: `[(3,)]` for an insert of three rows, `[]` for a table made.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import duckdb

from mcp_sim.state.sql_outcome import Outcome

# How long one call's statements may run in all (seconds): a runaway join is stopped, not waited for.
TIME_LIMIT_S = 5.0
# Statements that change nothing (they are left out of the log).
_READS = re.compile(r"^\s*(select|with|show|describe|summarize|pragma|explain|from|values|table)\b",
                    re.IGNORECASE)


def is_read(sql: str) -> bool:
    return _READS.match(sql) is not None


def run(log: Iterable[str], sql: str) -> Outcome:
    """Run SQL on a private database that LOG's statements build."""
    log = list(log)
    connection = duckdb.connect(":memory:", config={"enable_external_access": False})
    timer = threading.Timer(TIME_LIMIT_S, connection.interrupt)
    timer.start()
    try:
        for done in log:
            connection.execute(done)
        cursor = connection.execute(sql)
        columns = [column[0] for column in cursor.description or []]
        values = cursor.fetchall()
        rows = [dict(zip(columns, row, strict=False)) for row in values]
        return Outcome(rows=rows, tuples=values, dump=None if is_read(sql) else [*log, sql])
    except duckdb.Error as exc:
        return Outcome(error=str(exc))
    finally:
        timer.cancel()
        connection.close()
