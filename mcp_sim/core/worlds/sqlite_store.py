"""The SQLite store (`sqlite:///DIR`, or `--state-dir DIR`): worlds in DIR/worlds.sqlite3, so a restarted server
continues them. One process owns the file: its per-world locks are in-process."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar

from mcp_sim.core.prompt import Turn
from mcp_sim.core.worlds.store import NamedLocks, StoreError
from mcp_sim.core.worlds.world import World
from mcp_sim.state.live import LiveData

# 2 adds the live data of each world's spec files (x-sim.state); a version-1 file gains the table on open.
SCHEMA_VERSION = 2
# PRAGMA application_id: tells our database from any other SQLite file ("MSIW").
APPLICATION_ID = 0x4D534957
DATABASE_NAME = "worlds.sqlite3"
T = TypeVar("T")
COLUMNS = {"worlds": ["name", "scenario", "calls", "dropped", "forked_from", "created", "used"],
           "turns": ["world", "source", "seq", "action", "observation"],
           "live": ["world", "source", "state"]}


class SqliteStore:
    """Worlds in `DIR/worlds.sqlite3` (WAL): every answered call is committed before its result is sent."""

    shared = False

    def __init__(self, directory: Path):
        self.path = Path(directory) / DATABASE_NAME
        self.url = f"sqlite://{Path(directory)}"
        self._locks = NamedLocks()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One connection shared by the server's worker threads, serialized by a lock: writes are small.
            self._db = sqlite3.connect(self.path, check_same_thread=False)
            self._setup()
        except (OSError, sqlite3.Error, ValueError) as exc:  # ValueError: names in a damaged file that are not text
            raise StoreError(f"cannot keep worlds in {self.path}: {exc}. Pass a writable directory to "
                             "--state-dir, or leave it out to keep worlds in memory") from None
        self._lock = threading.Lock()

    def _setup(self) -> None:
        db = self._db
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and application_id != APPLICATION_ID:
            raise sqlite3.DatabaseError("it is a SQLite database of another program")
        # WAL with synchronous=FULL: a committed call survives a crash of the process or of the machine.
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.executescript("""
            CREATE TABLE IF NOT EXISTS worlds (
                name TEXT PRIMARY KEY, scenario TEXT NOT NULL, calls INTEGER NOT NULL, dropped TEXT NOT NULL,
                forked_from TEXT, created REAL NOT NULL, used REAL NOT NULL);
            CREATE TABLE IF NOT EXISTS turns (
                world TEXT NOT NULL, source TEXT NOT NULL, seq INTEGER NOT NULL, action TEXT NOT NULL,
                observation TEXT NOT NULL, PRIMARY KEY (world, source, seq));
            CREATE TABLE IF NOT EXISTS live (
                world TEXT NOT NULL, source TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (world, source));
        """)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, 1, SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"its schema version {version} is not {SCHEMA_VERSION}")
        for table, columns in COLUMNS.items():  # CREATE IF NOT EXISTS leaves a same-named table as it was
            found = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            if found != columns:
                raise sqlite3.DatabaseError(f"its table {table} has columns {', '.join(found)}, not "
                                            f"{', '.join(columns)}")
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def hold(self, name: str) -> AbstractContextManager[None]:
        return self._locks.hold(name)

    def version(self, name: str) -> int | None:
        return None  # one process owns the file: its cached worlds are the latest

    @contextmanager
    def _using(self) -> Iterator[None]:
        """Under the lock; a damaged file, or rows of the wrong types, become a StoreError naming it."""
        with self._lock:
            try:
                yield
            except (sqlite3.Error, ValueError, TypeError, RecursionError) as exc:
                raise StoreError(f"the world store {self.path} is damaged ({exc}); move it away, or pass another "
                                 "--state-dir") from None

    def load(self, name: str) -> World | None:
        with self._using():
            row = self._db.execute("SELECT scenario, calls, dropped, forked_from, created FROM worlds WHERE name=?",
                                   (name,)).fetchone()
            if row is None:
                return None
            scenario, calls, dropped, forked_from, created = row
            world = World(name, _typed(scenario, str), calls=_typed(calls, int), dropped=_dropped(dropped),
                          forked_from=None if forked_from is None else _typed(forked_from, str),
                          created=_typed(created, float))
            for source, action, observation in self._db.execute(
                    "SELECT source, action, observation FROM turns WHERE world=? ORDER BY source, seq", (name,)):
                turn = Turn(_typed(action, str), _typed(observation, str))
                world.turns.setdefault(_typed(source, str), []).append(turn)
            for source, state in self._db.execute("SELECT source, state FROM live WHERE world=?", (name,)):
                world.live[_typed(source, str)] = LiveData.from_json(json.loads(_typed(state, str)))
        return world

    def save(self, world: World) -> None:
        with self._using(), self._db:
            self._save(world)
            self._db.execute("DELETE FROM turns WHERE world=?", (world.name,))
            self._db.executemany(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?)",
                [(world.name, source, seq, turn.action, turn.observation)
                 for source, turns in world.turns.items() for seq, turn in enumerate(turns)])
            self._db.execute("DELETE FROM live WHERE world=?", (world.name,))
            for source in world.live:
                self._save_live(world, source)
        world.version += 1

    def append(self, world: World, source: str, turn: Turn) -> None:
        with self._using(), self._db:
            self._save(world)
            # The store numbers the turn: after the source's last one stored.
            self._db.execute("INSERT INTO turns SELECT ?, ?, COALESCE(MAX(seq) + 1, 0), ?, ? FROM turns "
                             "WHERE world=? AND source=?",
                             (world.name, source, turn.action, turn.observation, world.name, source))
            if source in world.live:
                self._save_live(world, source)
        world.version += 1

    def _save_live(self, world: World, source: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO live VALUES (?, ?, ?)",
                         (world.name, source, json.dumps(world.live[source].to_json(), ensure_ascii=False)))

    def _save(self, world: World) -> None:
        self._db.execute("INSERT OR REPLACE INTO worlds VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (world.name, world.scenario, world.calls, json.dumps(world.dropped), world.forked_from,
                          world.created, time.time()))

    def delete(self, name: str) -> None:
        with self._using(), self._db:
            self._db.execute("DELETE FROM turns WHERE world=?", (name,))
            self._db.execute("DELETE FROM live WHERE world=?", (name,))
            self._db.execute("DELETE FROM worlds WHERE name=?", (name,))

    def names(self) -> list[str]:
        with self._using():
            return [str(row[0]) for row in self._db.execute("SELECT name FROM worlds ORDER BY used")]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _typed(value: object, kind: type[T]) -> T:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"a column holds {type(value).__name__} {str(value)[:40]!r} where {kind.__name__} belongs")
    return value


def _dropped(raw: object) -> dict[str, int]:
    dropped = json.loads(_typed(raw, str))
    if not isinstance(dropped, dict) or not all(isinstance(v, int) for v in dropped.values()):
        raise ValueError(f"dropped {str(raw)[:40]!r} is not an object of counts")
    return dropped


def from_url(url: str) -> SqliteStore:
    """`sqlite://` then the directory: sqlite:///var/lib/mcp-sim (absolute), sqlite://state (relative)."""
    directory = url.split("://", 1)[1] if "://" in url else ""
    if not directory:
        raise StoreError(f"{url!r} names no directory: write sqlite:///ABSOLUTE/DIR or sqlite://RELATIVE/DIR")
    return SqliteStore(Path(directory))
