"""The response cache: a result stored once, answered byte for byte on every later identical call.

One SQLite file in WAL mode. Durability: `synchronous=FULL`, so a committed put survives not only a
killed process (WAL's NORMAL already gives that) but an OS crash or power cut too. The cost is one fsync
per put, and a put follows a model answer that took far longer; a get never syncs.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import ModelFileError
from mcp_sim.core.prompt import Turn
from mcp_sim.rehearsal.cache_file import BUSY_TIMEOUT_S, SCHEMA_VERSION, CacheError, open_cache
from mcp_sim.xsim.canonical import canonical_json

__all__ = ["CacheError", "CachedResult", "ResponseCache", "cache_key", "json_digest"]

# Part of every key: a change to what the key covers starts a fresh key space instead of a wrong hit.
KEY_FORMAT = "mcp-sim/response-cache-key/1"
HASH_CHUNK = 8 * 1024 * 1024

RESULT_COLUMNS = "result, model_hash, model_name, tool, arguments, world, created_at"


@dataclass(frozen=True)
class CachedResult:
    """A stored answer: the result bytes exactly as put, and what produced them."""

    result: bytes
    model_hash: str
    model_name: str
    tool: str
    arguments: dict[str, Any]
    world: str
    created_at: str


def cache_key(*, model_hash: str, prompt_version: str, spec_digest: str,
              history: Sequence[tuple[str, str] | Turn], tool: str, arguments: dict[str, Any],
              seed: int | None, options_digest: str, state: str | None = None) -> str:
    """sha256 over everything that decides an answer: model, prompt, spec, the world's turns and live data,
    call, seed. STATE (the live data's digest) is left out for tools without a state effect, whose keys then
    stay those of caches recorded before live state."""
    document = {"format": KEY_FORMAT, "model": model_hash, "prompt": prompt_version, "spec": spec_digest,
                "history": [_pair(turn) for turn in history], "tool": tool, "arguments": arguments,
                "seed": seed, "options": options_digest}
    if state is not None:
        document["state"] = state
    return hashlib.sha256(canonical_json(document).encode()).hexdigest()


def json_digest(value: Any) -> str:
    """sha256 of a value's canonical JSON: for spec_digest and options_digest."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _pair(turn: tuple[str, str] | Turn) -> list[str]:
    if isinstance(turn, Turn):
        return [turn.action, turn.observation]
    action, observation = turn
    return [action, observation]


def file_sha256(path: Path) -> str:
    """The content hash of a file, read in chunks (model files run to tens of GB)."""
    digest = hashlib.sha256()
    buffer = bytearray(HASH_CHUNK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while size := handle.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


class ResponseCache:
    """Answers by key from one SQLite file; safe across threads (one lock) and processes (WAL)."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = open_cache(self.path, create)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, key: str) -> CachedResult | None:
        """The stored answer for KEY, its result bytes unchanged, or None."""
        with self._using("read"):
            row = self._db.execute(f"SELECT {RESULT_COLUMNS} FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        result, model_hash, model_name, tool, arguments, world, created_at = row
        with self._decoding(key):
            if not isinstance(json.loads(result), dict):  # what a replay sends on must be a CallToolResult
                raise TypeError("the stored result is not a JSON object")
            return CachedResult(bytes(result), model_hash, model_name, tool, json.loads(arguments), world,
                                created_at)

    def put(self, key: str, result_json: bytes, *, model_hash: str, model_name: str, tool: str,
            arguments: dict[str, Any], world: str) -> bool:
        """Store an answer, committed (and synced) before returning; False when KEY already had one.

        The first answer stored for a key is kept: a replay never changes once a run has seen it."""
        _check_json(result_json, tool)
        row = (key, bytes(result_json), model_hash, model_name, tool, canonical_json(arguments), world, _now())
        with self._using("write to"), self._transaction():
            stored = self._db.execute(
                f"INSERT INTO responses (key, {RESULT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key) DO NOTHING", row).rowcount == 1
            self._db.execute("INSERT INTO models (model_name, model_hash) VALUES (?, ?) "
                             "ON CONFLICT (model_name) DO UPDATE SET model_hash = excluded.model_hash",
                             (model_name, model_hash))
        return stored

    def model_for_name(self, model_name: str) -> str | None:
        """The content hash of the model file that last answered under this --model name."""
        with self._using("read"):
            row = self._db.execute("SELECT model_hash FROM models WHERE model_name = ?", (model_name,)).fetchone()
        return None if row is None else str(row[0])

    def model_fingerprint(self, path: str | Path) -> str:
        """The sha256 of a model file's content, hashed once per path, size and mtime."""
        resolved = Path(path).resolve()
        before = _stat(resolved)
        with self._using("read"):
            row = self._db.execute("SELECT sha256 FROM fingerprints WHERE path = ? AND size = ? AND mtime_ns = ?",
                                   (str(resolved), *before)).fetchone()
        if row is not None:
            return str(row[0])
        digest = file_sha256(resolved)  # outside the lock: hashing 20 GB must not hold up hits
        if _stat(resolved) == before:  # a file changed while hashing is not remembered
            with self._using("write to"), self._transaction():
                self._db.execute("INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?, ?)",
                                 (str(resolved), *before, digest))
        return digest

    def stats(self) -> dict[str, Any]:
        """Entries in all, per tool and per model, and the size of the files on disk."""
        with self._using("read"):
            entries = self._db.execute("SELECT count(*) FROM responses").fetchone()[0]
            tools = self._db.execute("SELECT tool, count(*) FROM responses GROUP BY tool ORDER BY tool").fetchall()
            models = self._db.execute("SELECT model_name, model_hash, count(*) FROM responses "
                                      "GROUP BY model_name, model_hash ORDER BY model_name").fetchall()
        return {"path": str(self.path), "schema_version": SCHEMA_VERSION, "entries": entries,
                "tools": dict(tools), "size_bytes": self._size_on_disk(),
                "models": [{"model_name": n, "model_hash": h, "entries": c} for n, h, c in models]}

    def export(self, out: str | Path) -> int:
        """Every entry as one JSON object per line (result parsed); returns how many."""
        count = 0
        with self._using("read"), Path(out).open("w", encoding="utf-8") as handle:
            rows = self._db.execute(f"SELECT key, {RESULT_COLUMNS} FROM responses ORDER BY rowid")
            for key, result, model_hash, model_name, tool, arguments, world, created_at in rows:
                with self._decoding(key):
                    entry = {"key": key, "tool": tool, "arguments": json.loads(arguments), "world": world,
                             "model_name": model_name, "model_hash": model_hash, "created_at": created_at,
                             "result": json.loads(result)}
                handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
                count += 1
        return count

    def clear(self) -> int:
        """Remove every stored answer and model name (file hashes stay: they are costly and still true)."""
        with self._using("write to"):
            with self._transaction():
                removed = self._db.execute("DELETE FROM responses").rowcount
                self._db.execute("DELETE FROM models")
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(removed)

    def _size_on_disk(self) -> int:
        files = [self.path, self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm")]
        return sum(f.stat().st_size for f in files if f.exists())

    @contextmanager
    def _using(self, action: str) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise CacheError(f"cannot {action} the response cache {self.path}: {exc}{_hint(exc)}") from None

    @contextmanager
    def _decoding(self, key: str) -> Iterator[None]:
        # A row this mcp-sim did not write (edited by hand, or by a broken tool): its columns hold the wrong types.
        try:
            yield
        except (ValueError, TypeError, RecursionError) as exc:
            raise CacheError(f"{self.path}: entry {key!r} is damaged ({type(exc).__name__}: {exc}); clear it "
                             f"with `mcp-sim cache clear {self.path}` or give --cache a new file") from None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writing processes queue on the busy timeout
        # instead of one failing when it upgrades a read lock.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


def _check_json(result_json: bytes, tool: str) -> None:
    try:
        json.loads(result_json)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CacheError(f"refusing to cache the result of {tool!r}: it is not UTF-8 JSON ({exc})") from None


def _stat(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
    except OSError as exc:
        raise ModelFileError(f"cannot read the model file {path}: {exc.strerror}; check the --model path") from None
    return info.st_size, info.st_mtime_ns


def _hint(exc: sqlite3.Error) -> str:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return f" (another process held it for more than {BUSY_TIMEOUT_S:.0f} s)"
    if "readonly" in text or "read-only" in text:
        return " (the file or its folder is read-only; WAL needs to write -wal and -shm files beside it)"
    if "full" in text:
        return " (the disk is full)"
    return ""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")
