"""A bounded store of model-state snapshots, so a call evaluates only the tokens it adds.

A snapshot is the engine's KV (or recurrent) state after evaluating exactly `tokens`. The engine keeps one
per session (its history so far) and one per system prompt (shared by every session of that spec), and
restores the one that covers the longest prefix of the next prompt. Pure bookkeeping: the engine does the
saving and restoring.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Snapshot:
    tokens: tuple[int, ...]
    state: memoryview  # the engine's serialized state

    @property
    def nbytes(self) -> int:
        # Tokens are kept as Python ints: count them at 8 bytes apiece.
        return self.state.nbytes + 8 * len(self.tokens)


def common_prefix(a: tuple[int, ...] | list[int], b: tuple[int, ...] | list[int]) -> int:
    count = 0
    for x, y in zip(a, b, strict=False):  # the sequences differ in length by design
        if x != y:
            break
        count += 1
    return count


class StateCache:
    """Snapshots by key, least recently used evicted once their total size passes `max_bytes`."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, Snapshot] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def put(self, key: str, snapshot: Snapshot) -> None:
        if snapshot.nbytes > self.max_bytes:
            return  # would evict everything else and still not fit
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._entries[key] = snapshot
            self._bytes += snapshot.nbytes
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes

    def get(self, key: str) -> Snapshot | None:
        with self._lock:
            return self._entries.get(key)

    def best(self, keys: list[str], tokens: list[int], exact: bool) -> tuple[str, Snapshot, int] | None:
        """Of the snapshots under `keys`, the one sharing the longest prefix with `tokens`.

        With `exact`, only snapshots that are whole prefixes of `tokens` count: recurrent state cannot be
        rolled back to an earlier token, so a snapshot that diverges is useless there.
        """
        found: tuple[str, Snapshot, int] | None = None
        with self._lock:
            for key in keys:
                snapshot = self._entries.get(key)
                if snapshot is None:
                    continue
                shared = common_prefix(snapshot.tokens, tokens)
                if exact and shared != len(snapshot.tokens):
                    continue
                if found is None or shared > found[2]:
                    found = (key, snapshot, shared)
            if found is not None:
                self._entries.move_to_end(found[0])
        return found
