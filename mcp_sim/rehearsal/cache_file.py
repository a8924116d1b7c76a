"""Opening a response cache file: refuse what is not one (another SQLite file, a newer schema, not SQLite at
all) before touching it, create it once even when two processes race, and switch it to WAL."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from mcp_sim.base.errors import McpSimError

SCHEMA_VERSION = 1
# PRAGMA application_id: "mcsc" marks the file as an mcp-sim response cache.
APPLICATION_ID = 0x6D637363
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_S = 30.0

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS responses (
        key TEXT PRIMARY KEY, result BLOB NOT NULL, model_hash TEXT NOT NULL, model_name TEXT NOT NULL,
        tool TEXT NOT NULL, arguments TEXT NOT NULL, world TEXT NOT NULL, created_at TEXT NOT NULL)""",
    # The model file that last answered under each --model name, so replay works without the file.
    "CREATE TABLE IF NOT EXISTS models (model_name TEXT PRIMARY KEY, model_hash TEXT NOT NULL)",
    # Content hashes of model files, valid while path, size and mtime stay the same.
    """CREATE TABLE IF NOT EXISTS fingerprints (
        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL)""",
)


class CacheError(McpSimError):
    """The cache file cannot be used: foreign, damaged, newer, missing or not writable."""


def open_cache(path: Path, create: bool) -> sqlite3.Connection:
    _check_file(path, create)
    with _setting_up(path):
        return _connect(path)


@contextlib.contextmanager
def _setting_up(path: Path) -> Iterator[None]:
    """One process at a time checks and creates a cache: two creating the same new file at once could each
    see the other's tables before its identity (seen under load), and refuse it as foreign. flock() on the
    file itself is independent of SQLite's own fcntl() locks."""
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise CacheError(f"cannot open the response cache {path}: {exc}; check that its folder is writable") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # closing releases the lock


def _connect(path: Path) -> sqlite3.Connection:
    try:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise CacheError(f"cannot open the response cache {path}: {exc}; check that its folder is writable") from None
    try:
        _check_identity(db, path)
        _enable_wal(db, path)
        db.execute("PRAGMA synchronous = FULL")
        _create_schema(db, path)
    except (sqlite3.Error, ValueError) as exc:  # ValueError: names in a damaged file that are not text
        db.close()
        raise CacheError(f"{path} is damaged or not an SQLite database ({exc}). Give --cache a new file, "
                         f"or delete {path} if it was a cache.") from None
    except CacheError:
        db.close()
        raise
    return db


def _check_file(path: Path, create: bool) -> None:
    """Refuse a file that is not SQLite before SQLite touches it."""
    if not path.exists():
        if not create:
            raise CacheError(f"no response cache at {path}: check the path (a cache is created by "
                             "`mcp-sim serve --cache PATH`)")
        path.parent.mkdir(parents=True, exist_ok=True)
        return
    if path.is_dir():
        raise CacheError(f"{path} is a folder; --cache takes a file path such as {path / 'cache.db'}")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise CacheError(f"cannot read the response cache {path}: {exc.strerror}") from None
    if header and header != SQLITE_HEADER:  # an empty file is a new cache
        raise CacheError(f"{path} is not an mcp-sim response cache (not an SQLite database). Give --cache a "
                         "new file name; mcp-sim leaves this one untouched.")


def _check_identity(db: sqlite3.Connection, path: Path) -> bool:
    """True for a fresh database; raises for a foreign or incompatible one."""
    application_id = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if application_id == APPLICATION_ID:
        if version != SCHEMA_VERSION:
            newer = "a newer mcp-sim; upgrade mcp-sim" if version > SCHEMA_VERSION else "an older mcp-sim"
            raise CacheError(f"{path} is a response cache of schema {version}, written by {newer}, "
                             f"or give --cache a new file (this mcp-sim reads schema {SCHEMA_VERSION})")
        return False
    tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    if application_id == 0 and not tables:
        return True
    raise CacheError(f"{path} is an SQLite database but not an mcp-sim response cache (application_id "
                     f"{application_id:#x}, tables: {', '.join(tables) or 'none'}). Give --cache a new file "
                     "name; mcp-sim leaves this one untouched.")


def _enable_wal(db: sqlite3.Connection, path: Path) -> None:
    # Switching a new file to WAL needs a moment alone with it: another process creating the same
    # cache at the same time makes the switch report the old mode, so try again briefly.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while db.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
        if time.monotonic() > deadline:
            raise CacheError(f"cannot switch {path} to WAL mode: another process keeps it busy")
        time.sleep(0.05)


def _create_schema(db: sqlite3.Connection, path: Path) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        if _check_identity(db, path):  # again under the write lock: another process may have won
            for statement in SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
