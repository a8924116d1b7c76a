"""The ledger: one JSON line per call of a tool that may change the world, durable and safe to share.

Several servers may append to one file and any of them may be killed at any moment: each entry is a
single `write` on an O_APPEND descriptor under an exclusive lock, fsynced before `append` returns.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pydantic

from mcp_sim.base.errors import McpSimError

log = logging.getLogger(__name__)

# Every line starts with this (pydantic writes fields in declared order): a line that begins like an entry
# but does not parse was torn by a crash mid-write, anything else means the file is not a ledger.
_ENTRY_START = '{"time":'
# Read as well as append: a writer looks at the last byte to end a line a killed writer left unfinished.
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT


class LedgerError(McpSimError):
    """The ledger cannot be written or read."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


class LedgerEntry(pydantic.BaseModel):
    """One completed call of a tool that may change the world."""

    model_config = pydantic.ConfigDict(extra="forbid")

    time: datetime = pydantic.Field(default_factory=_now)  # ISO 8601, UTC
    world: str
    tool: str
    arguments: dict[str, Any]
    is_error: bool
    result: str  # the result's text, or the error message
    structured: dict[str, Any] | None = None  # the result's structuredContent
    faults: list[str] = pydantic.Field(default_factory=list)
    destructive: bool
    latency_ms: float | None = None
    source: str | None = None  # who made the call: "model", "fixture", ...
    # What the call changed in the world's live data: {collection, op, key, before, after} (x-sim.state).
    state: dict[str, Any] | None = None
    server: int = pydantic.Field(default_factory=os.getpid)

    @pydantic.field_validator("time")
    @classmethod
    def _in_utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("time needs a timezone (the ledger keeps UTC)")
        return value.astimezone(timezone.utc)


# MCP's ToolAnnotations (schemas 2025-11-25 and 2026-07-28, in mcp_types): readOnlyHint defaults to false and
# destructiveHint to true, the latter meaningful only when readOnlyHint is false. So a tool with no
# annotations may change the world destructively; only an explicit readOnlyHint keeps it out of the ledger.
def writes_world(annotations: dict[str, Any] | None) -> bool:
    """True unless the tool says it is read-only (MCP default: readOnlyHint false)."""
    return (annotations or {}).get("readOnlyHint") is not True


def is_destructive(annotations: dict[str, Any] | None) -> bool:
    """True for a tool that may change the world and does not say destructiveHint: false (MCP default: true)."""
    return writes_world(annotations) and (annotations or {}).get("destructiveHint") is not False


class Ledger:
    """An append-only JSON Lines file of calls that may change the world."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, _OPEN_FLAGS, 0o644))
        except OSError as exc:  # checked now, so that a server fails at startup rather than on its first call
            raise LedgerError(f"cannot write the ledger {self.path}: {exc.strerror}; "
                              "pick a writable file with --ledger") from None

    def append(self, entry: LedgerEntry) -> None:
        """Write one entry as one line; on disk (fsynced) when this returns."""
        try:
            _append_line(self.path, (entry.model_dump_json() + "\n").encode())
        except OSError as exc:
            raise LedgerError(f"cannot write the ledger {self.path}: {exc.strerror}") from None

    def record(self, *, annotations: dict[str, Any] | None, world: str, tool: str, arguments: dict[str, Any],
               is_error: bool, result: str, structured: dict[str, Any] | None = None,
               faults: Iterable[str] = (), latency_ms: float | None = None,
               source: str | None = None, state: dict[str, Any] | None = None) -> LedgerEntry | None:
        """Append a completed call unless the tool is read-only; returns the entry written, if any."""
        if not writes_world(annotations):
            return None
        entry = LedgerEntry(world=world, tool=tool, arguments=arguments, is_error=is_error, result=result,
                            structured=structured, faults=list(faults), destructive=is_destructive(annotations),
                            latency_ms=latency_ms, source=source, state=state)
        self.append(entry)
        return entry


def _append_line(path: Path, line: bytes) -> None:
    # A descriptor per call: flock excludes other open file descriptions, so threads, forked children and
    # other processes all wait for each other.
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _write_all(fd, _terminate_torn_line(fd) + line)
        os.fsync(fd)
    finally:
        os.close(fd)  # also releases the lock


def _terminate_torn_line(fd: int) -> bytes:
    """A newline when a writer died mid-line, so that the next entry starts on a line of its own."""
    size = os.fstat(fd).st_size
    return b"\n" if size and os.pread(fd, 1, size - 1) != b"\n" else b""


def _write_all(fd: int, data: bytes) -> None:
    # Regular files take the whole line in one write; the loop only matters when the disk fills up.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def read_ledger(path: str | os.PathLike[str]) -> list[LedgerEntry]:
    """Every entry in the file; lines torn by a crash are skipped with a warning."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LedgerError(f"cannot read the ledger {path}: {exc.strerror}") from None
    entries = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            entry = _parse_line(path, number, line)
            if entry is not None:
                entries.append(entry)
    return entries


def _parse_line(path: Path, number: int, line: bytes) -> LedgerEntry | None:
    try:
        text = line.decode()
        document = json.loads(text)
    except (ValueError, RecursionError):  # ValueError: UnicodeDecodeError, JSONDecodeError, 4300+ digit integers
        if line.startswith(_ENTRY_START.encode()):
            log.warning("%s line %d: an entry cut short (a writer was killed mid-write); skipped", path, number)
            return None
        raise LedgerError(f"{path} line {number}: not a ledger entry (not a JSON line); "
                          "is this a file written by --ledger?") from None
    try:
        return LedgerEntry.model_validate(document)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in exc.errors()[:3])
        raise LedgerError(f"{path} line {number}: not a ledger entry ({problems}); "
                          "is this a file written by --ledger?") from None


def summarize(entries: Sequence[LedgerEntry]) -> str:
    """One paragraph: how many calls would have changed which worlds, and how."""
    if not entries:
        return "No calls that change the world."
    worlds = len({e.world for e in entries})
    destructive = [e.tool for e in entries if e.destructive]
    writes = [e.tool for e in entries if not e.destructive]
    parts = [_kind(len(destructive), "destructive", "destructive", destructive),
             _kind(len(writes), "write", "writes", writes)]
    failed = sum(e.is_error for e in entries)
    faulted = sum(bool(e.faults) for e in entries)
    tail = f"{failed} failed" if failed else "none failed"
    if faulted:
        tail += f", {faulted} under injected faults"
    return (f"{_plural(len(entries), 'call')} that change the world in {_plural(worlds, 'world')}: "
            f"{', '.join(p for p in parts if p)}; {tail}.")


def _kind(count: int, one: str, many: str, tools: list[str]) -> str:
    if not count:
        return ""
    tally = ", ".join(f"{tool} x{n}" for tool, n in sorted(Counter(tools).items(), key=lambda t: (-t[1], t[0])))
    return f"{count} {one if count == 1 else many} ({tally})"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
