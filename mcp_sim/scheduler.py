"""Fair admission of calls to a few model slots: sessions take turns, the queue is bounded.

One model instance answers one call at a time. When many sessions call at once, a plain lock lets a
chatty session starve the others; here each session waits in its own line and the lines are served
round-robin, so a session waits for at most one call of each other session before its own.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from mcp_sim.errors import BusyError


class FairScheduler:
    def __init__(self, slots: int = 1, max_waiting: int = 64):
        self.slots = slots
        self.max_waiting = max_waiting
        self._free = slots
        # session id -> the events of its waiting calls, in arrival order; sessions in round-robin order.
        self._lines: OrderedDict[str, deque[anyio.Event]] = OrderedDict()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def busy(self) -> int:
        return self.slots - self._free

    @asynccontextmanager
    async def slot(self, session_id: str) -> AsyncIterator[None]:
        """Hold one model slot for the duration of the block, waiting for this session's fair turn."""
        if self._free > 0 and not self._lines:
            self._free -= 1
        else:
            if self._waiting >= self.max_waiting:
                raise BusyError(f"the simulator is busy: {self._waiting} calls are already waiting for the "
                                "model; retry shortly, or serve with more --parallel instances or --max-queue")
            turn = anyio.Event()
            self._lines.setdefault(session_id, deque()).append(turn)
            self._waiting += 1
            try:
                await turn.wait()
            except BaseException:
                self._abandon(session_id, turn)
                raise
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        """Hand the slot to the first call of the next session in line, or free it."""
        if not self._lines:
            self._free += 1
            return
        session_id, line = next(iter(self._lines.items()))
        turn = line.popleft()
        self._waiting -= 1
        del self._lines[session_id]
        if line:  # the session goes to the back of the round
            self._lines[session_id] = line
        turn.set()

    def _abandon(self, session_id: str, turn: anyio.Event) -> None:
        if turn.is_set():
            # The slot was handed to us just as we were cancelled: pass it on.
            self._release()
            return
        line = self._lines.get(session_id)
        if line is not None and turn in line:
            line.remove(turn)
            self._waiting -= 1
            if not line:
                del self._lines[session_id]
