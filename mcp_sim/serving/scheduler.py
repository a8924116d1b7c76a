"""Fair admission of calls to a few model slots: worlds take turns, each world's calls in arrival order.

One model instance answers one call at a time. When many worlds call at once, a plain lock lets a chatty
world starve the others; here each world waits in its own line and the lines are served round-robin, so
a world waits for at most one call of each other world before its own. A world never has two calls
admitted at once, even with several slots: its calls are answered one by one, in the order they came.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from mcp_sim.base import defaults
from mcp_sim.base.errors import BusyError


class FairScheduler:
    def __init__(self, slots: int = 1, max_waiting: int = defaults.MAX_QUEUE):
        self.slots = slots
        self.max_waiting = max_waiting
        self._free = slots
        # line key (a world) -> the events of its waiting calls, in arrival order; lines in round-robin order.
        self._lines: OrderedDict[str, deque[anyio.Event]] = OrderedDict()
        self._running: set[str] = set()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def busy(self) -> int:
        return self.slots - self._free

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        """Hold one model slot for the duration of the block, waiting for this line's fair turn."""
        # A free slot with lines still waiting means those lines' worlds are running: taking it is fair.
        if self._free > 0 and key not in self._running and key not in self._lines:
            self._free -= 1
            self._running.add(key)
        else:
            if self._waiting >= self.max_waiting:
                raise BusyError(f"the simulator is busy: {self._waiting} calls are already waiting for the "
                                "model; retry shortly, or serve with more --parallel instances or --max-queue")
            turn = anyio.Event()
            self._lines.setdefault(key, deque()).append(turn)
            self._waiting += 1
            try:
                await turn.wait()
            except BaseException:
                self._abandon(key, turn)
                raise
        try:
            yield
        finally:
            self._finish(key)

    def _finish(self, key: str) -> None:
        self._free += 1
        self._running.discard(key)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to the first call of each next line in the round whose world is not running."""
        while self._free > 0:
            key = next((k for k in self._lines if k not in self._running), None)
            if key is None:
                return
            line = self._lines.pop(key)
            turn = line.popleft()
            if line:  # the line goes to the back of the round
                self._lines[key] = line
            self._waiting -= 1
            self._free -= 1
            self._running.add(key)
            turn.set()

    def _abandon(self, key: str, turn: anyio.Event) -> None:
        if turn.is_set():
            # The slot was handed to us just as we were cancelled: pass it on.
            self._finish(key)
            return
        line = self._lines.get(key)
        if line is not None and turn in line:
            line.remove(turn)
            self._waiting -= 1
            if not line:
                del self._lines[key]
