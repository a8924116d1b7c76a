"""The Postgres store (`postgresql://USER@HOST:PORT/DB`): one set of worlds shared by every mcp-sim instance
behind a load balancer.

- A call holds its world's lock for the whole call: a session-level `pg_advisory_lock` on a hash of the
  world's name, taken on a pooled connection kept for the call. Postgres queues the waiters, so a world's
  calls are answered one at a time across every instance. An instance that dies mid-call ends its session,
  and Postgres releases the lock; nothing it had not committed was answered.
- Writes made while holding the lock go over that same connection: if it broke (and the lock went with it),
  the write fails instead of landing under another instance's lock.
- A turn, the world's header (calls, version) and the live data it changed are one transaction.
- Each write bumps the world's version; the registry reads a world again when its cached copy is behind.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from mcp_sim.base import defaults
from mcp_sim.core.prompt import Turn
from mcp_sim.core.worlds.store import NamedLocks, StoreError
from mcp_sim.core.worlds.world import World
from mcp_sim.state.live import LiveData

# 1: worlds, turns, live data, each world with a version.
SCHEMA_VERSION = 1
# Held while one instance creates or upgrades the schema, so two starting at once do not race.
SCHEMA_LOCK = 0x4D53_4957_0000_0001
SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_sim_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mcp_sim_worlds (
    name TEXT PRIMARY KEY, scenario TEXT NOT NULL, calls BIGINT NOT NULL, dropped TEXT NOT NULL,
    forked_from TEXT, created DOUBLE PRECISION NOT NULL, used DOUBLE PRECISION NOT NULL,
    version BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS mcp_sim_turns (
    world TEXT NOT NULL, source TEXT NOT NULL, seq INTEGER NOT NULL, action TEXT NOT NULL,
    observation TEXT NOT NULL, PRIMARY KEY (world, source, seq));
CREATE TABLE IF NOT EXISTS mcp_sim_live (
    world TEXT NOT NULL, source TEXT NOT NULL, state TEXT NOT NULL, PRIMARY KEY (world, source));
"""
_FAILURES = (psycopg.Error, PoolTimeout)


def lock_key(name: str) -> int:
    """A world's advisory lock: 64 bits of a hash of its name (a collision only serializes two worlds)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def without_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


class PostgresStore:
    """Worlds in Postgres tables named mcp_sim_*; safe to share among any number of processes."""

    shared = True

    def __init__(self, url: str, pool_size: int = defaults.STORE_POOL_SIZE, wait: float = defaults.STORE_WAIT_S):
        self.url = without_password(url)
        self._locks = NamedLocks()
        # The connection that holds each world's advisory lock, per thread holding it.
        self._held: dict[tuple[str, int], psycopg.Connection[Any]] = {}
        timeout = max(1, round(wait))
        try:  # one connection first: a store that is down or refuses us fails now, saying why
            with psycopg.connect(url, autocommit=True, connect_timeout=timeout) as db:
                self._setup(db)
        except _FAILURES as exc:
            raise StoreError(f"cannot reach the world store {self.url}: {_reason(exc)}. Start Postgres there, "
                             "or fix --store (postgresql://USER@HOST:PORT/DB)") from None
        self._pool = ConnectionPool(url, min_size=1, max_size=pool_size, timeout=wait, open=True,
                                    kwargs={"autocommit": True, "connect_timeout": timeout},
                                    check=ConnectionPool.check_connection, name="mcp-sim-worlds")

    def _setup(self, db: psycopg.Connection[Any]) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            db.execute(SCHEMA)
            row = db.execute("SELECT version FROM mcp_sim_schema").fetchone()
            if row is None:
                db.execute("INSERT INTO mcp_sim_schema VALUES (%s)", (SCHEMA_VERSION,))
            elif row[0] > SCHEMA_VERSION:
                raise StoreError(f"the world store {self.url} has schema version {row[0]}, written by a newer "
                                 f"mcp-sim (this one knows {SCHEMA_VERSION}): upgrade mcp-sim")
            # Older versions are upgraded here, one step at a time, as the schema grows.

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        with self._locks.hold(name):  # threads of this process queue here, holding no connection
            with self._failures():
                db = self._pool.getconn()
            key = (name, threading.get_ident())
            try:
                with self._failures():
                    db.execute("SELECT pg_advisory_lock(%s)", (lock_key(name),))
                self._held[key] = db
                try:
                    yield
                finally:
                    del self._held[key]
                    if not db.broken:
                        with suppress(psycopg.Error):  # a lost session released the lock with itself
                            db.execute("SELECT pg_advisory_unlock(%s)", (lock_key(name),))
            finally:
                self._pool.putconn(db)  # a broken connection is thrown away (its session, and lock, are gone)

    @contextmanager
    def _connection(self, name: str | None = None) -> Iterator[psycopg.Connection[Any]]:
        """The connection holding NAME's lock in this thread, else one from the pool; failures name the store."""
        held = self._held.get((name, threading.get_ident())) if name is not None else None
        with self._failures():
            if held is not None:
                yield held
            else:
                with self._pool.connection() as db:
                    yield db

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except _FAILURES as exc:
            raise StoreError(f"the world store {self.url} failed: {_reason(exc)}; nothing was stored, and the "
                             "call can be sent again once Postgres answers") from None
        except (ValueError, TypeError) as exc:
            raise StoreError(f"the world store {self.url} holds rows mcp-sim cannot read ({exc})") from None

    def version(self, name: str) -> int | None:
        with self._connection(name) as db:
            row = db.execute("SELECT version FROM mcp_sim_worlds WHERE name=%s", (name,)).fetchone()
        return None if row is None else int(row[0])

    def load(self, name: str) -> World | None:
        with self._connection(name) as db, db.transaction():
            # One snapshot: a world written meanwhile by another instance is read whole, before or after.
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = db.execute("SELECT scenario, calls, dropped, forked_from, created, version FROM mcp_sim_worlds "
                             "WHERE name=%s", (name,)).fetchone()
            if row is None:
                return None
            scenario, calls, dropped, forked_from, created, version = row
            world = World(name, str(scenario), calls=int(calls), dropped=_dropped(dropped),
                          forked_from=forked_from, created=float(created), version=int(version))
            for source, action, observation in db.execute(
                    "SELECT source, action, observation FROM mcp_sim_turns WHERE world=%s ORDER BY source, seq",
                    (name,)):
                world.turns.setdefault(source, []).append(Turn(action, observation))
            for source, state in db.execute("SELECT source, state FROM mcp_sim_live WHERE world=%s", (name,)):
                world.live[source] = LiveData.from_json(json.loads(state))
        return world

    def save(self, world: World) -> None:
        with self._connection(world.name) as db, db.transaction():
            world.version = self._save_header(db, world)
            db.execute("DELETE FROM mcp_sim_turns WHERE world=%s", (world.name,))
            with db.cursor() as cursor:
                cursor.executemany("INSERT INTO mcp_sim_turns VALUES (%s, %s, %s, %s, %s)",
                                   [(world.name, source, seq, turn.action, turn.observation)
                                    for source, turns in world.turns.items() for seq, turn in enumerate(turns)])
            db.execute("DELETE FROM mcp_sim_live WHERE world=%s", (world.name,))
            for source in world.live:
                self._save_live(db, world, source)

    def append(self, world: World, source: str, turn: Turn) -> None:
        with self._connection(world.name) as db, db.transaction():
            version = self._save_header(db, world)
            # The store numbers the turn: after the source's last one stored.
            db.execute("INSERT INTO mcp_sim_turns SELECT %s, %s, COALESCE(MAX(seq) + 1, 0), %s, %s "
                       "FROM mcp_sim_turns WHERE world=%s AND source=%s",
                       (world.name, source, turn.action, turn.observation, world.name, source))
            if source in world.live:
                self._save_live(db, world, source)
        world.version = version

    @staticmethod
    def _save_header(db: psycopg.Connection[Any], world: World) -> int:
        row = db.execute(
            "INSERT INTO mcp_sim_worlds VALUES (%s, %s, %s, %s, %s, %s, %s, 1) ON CONFLICT (name) DO UPDATE SET "
            "scenario=EXCLUDED.scenario, calls=EXCLUDED.calls, dropped=EXCLUDED.dropped, "
            "forked_from=EXCLUDED.forked_from, created=EXCLUDED.created, used=EXCLUDED.used, "
            "version=mcp_sim_worlds.version + 1 RETURNING version",
            (world.name, world.scenario, world.calls, json.dumps(world.dropped), world.forked_from, world.created,
             time.time())).fetchone()
        assert row is not None  # RETURNING gives the row written
        return int(row[0])

    @staticmethod
    def _save_live(db: psycopg.Connection[Any], world: World, source: str) -> None:
        db.execute("INSERT INTO mcp_sim_live VALUES (%s, %s, %s) ON CONFLICT (world, source) DO UPDATE SET "
                   "state=EXCLUDED.state",
                   (world.name, source, json.dumps(world.live[source].to_json(), ensure_ascii=False)))

    def delete(self, name: str) -> None:
        with self._connection(name) as db, db.transaction():
            db.execute("DELETE FROM mcp_sim_turns WHERE world=%s", (name,))
            db.execute("DELETE FROM mcp_sim_live WHERE world=%s", (name,))
            db.execute("DELETE FROM mcp_sim_worlds WHERE name=%s", (name,))

    def names(self) -> list[str]:
        with self._connection() as db:
            return [str(row[0]) for row in db.execute("SELECT name FROM mcp_sim_worlds ORDER BY used")]

    def close(self) -> None:
        self._pool.close()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _dropped(raw: object) -> dict[str, int]:
    dropped = json.loads(str(raw))
    if not isinstance(dropped, dict) or not all(isinstance(v, int) for v in dropped.values()):
        raise ValueError(f"dropped {str(raw)[:40]!r} is not an object of counts")
    return dropped


def from_url(url: str) -> PostgresStore:
    return PostgresStore(url)
