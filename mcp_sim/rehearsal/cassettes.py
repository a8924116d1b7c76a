"""Cassettes: real recorded calls (`mcp-sim record` traces) answered again, in recorded order, per world.

A call matches a recorded one when its tool and arguments are equal (canonical JSON: key order does not
matter, values and types do). Identical calls recorded several times answer in the order they were
recorded (file order, then line order, which is the order the real server answered them); each world
walks that order from the start on its own, and once the recorded answers run out the call is a miss.
Recorded arguments were redacted and had paths replaced when recorded, so a call must use the recorded
forms (`[REDACTED]`, `/sandbox/...`) to match.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.prompt import Turn, render_action, render_observation
from mcp_sim.rehearsal.traces import TraceRecord, read_traces, result_text
from mcp_sim.xsim.canonical import canonical_json


class CassetteError(McpSimError):
    """A cassette file cannot be replayed."""


@dataclass(frozen=True)
class RecordedCall:
    """One real answer, as the client saw it."""

    tool: str
    arguments: dict[str, Any]
    # The CallToolResult as on the wire: {"content": [...], "structuredContent": ..., "isError": bool}.
    result: dict[str, Any]
    # Where it was recorded, "FILE:N SESSION#STEP" (the N-th call of FILE), for _meta and messages.
    origin: str
    # The real server answered with a JSON-RPC error of this code (its message is the text).
    protocol_error: int | None = None
    # The notifications and requests the real server sent the client during the call, in order.
    interactions: tuple[dict[str, Any], ...] = ()

    @property
    def text(self) -> str:
        return result_text(self.result)

    @property
    def structured(self) -> dict[str, Any] | None:
        value = self.result.get("structuredContent")
        return value if isinstance(value, dict) else None

    @property
    def is_error(self) -> bool:
        return bool(self.result.get("isError")) or self.protocol_error is not None

    @property
    def content(self) -> list[Any]:
        return list(self.result.get("content") or [])

    def turn(self) -> Turn:
        """This call as a turn of the world's history, so the model stays consistent with it."""
        observation = self.text if self.is_error else render_observation(self.structured, self.text)
        return Turn(render_action(self.tool, self.arguments), observation)


class Cassette:
    """Recorded calls by (tool, arguments), with one cursor per world for each."""

    def __init__(self, calls: Sequence[RecordedCall]):
        self._recorded: dict[tuple[str, str], list[RecordedCall]] = {}
        for call in calls:
            self._recorded.setdefault(_key(call.tool, call.arguments), []).append(call)
        self._cursors: dict[str, dict[tuple[str, str], int]] = {}
        self._lock = threading.Lock()

    @classmethod
    def load(cls, paths: Sequence[str | Path]) -> Cassette:
        """Read `mcp-sim record` JSONL files; a bad or empty file is a CassetteError naming it."""
        calls: list[RecordedCall] = []
        for path in map(Path, paths):
            records = read_traces([path])  # raises TraceError (an McpSimError) naming the file and line
            if not records:
                raise CassetteError(f"{path}: holds no recorded calls; write one with `mcp-sim record --out {path}`")
            calls.extend(_recorded(record, f"{path}:{number}") for number, record in enumerate(records, 1))
        return cls(calls)

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._recorded.values())

    def recorded(self, tool: str, arguments: dict[str, Any]) -> list[RecordedCall]:
        """Every recorded answer to this call, in recorded order."""
        return list(self._recorded.get(_key(tool, arguments), ()))

    def take(self, world: str, tool: str, arguments: dict[str, Any]) -> RecordedCall | None:
        """The next recorded answer to this call in WORLD, or None when there is none (left)."""
        key = _key(tool, arguments)
        recorded = self._recorded.get(key)
        if not recorded:
            return None
        with self._lock:
            cursors = self._cursors.setdefault(world, {})
            position = cursors.get(key, 0)
            if position >= len(recorded):
                return None
            cursors[key] = position + 1
        return recorded[position]

    def remaining(self, world: str, tool: str, arguments: dict[str, Any]) -> int:
        """How many recorded answers to this call WORLD has not taken yet."""
        key = _key(tool, arguments)
        with self._lock:
            return len(self._recorded.get(key, ())) - self._cursors.get(world, {}).get(key, 0)

    def reset(self, world: str) -> None:
        """Start WORLD from the first recorded answers again (for a world reset)."""
        with self._lock:
            self._cursors.pop(world, None)

    def fork(self, source: str, target: str) -> None:
        """TARGET continues where SOURCE is (for a world fork)."""
        with self._lock:
            self._cursors[target] = dict(self._cursors.get(source, {}))


def _key(tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    return tool, canonical_json(arguments)


def _recorded(record: TraceRecord, origin: str) -> RecordedCall:
    return RecordedCall(record.tool, record.arguments, record.result,
                        f"{origin} {record.session}#{record.step}", record.protocol_error,
                        tuple(record.interactions))
