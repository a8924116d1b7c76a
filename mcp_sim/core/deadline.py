"""The call timeout: a generation that runs past `--call-timeout` is stopped between tokens.

The limit sets the call's cancel event, exactly as a client's cancellation does, so every engine and fault
that already stops on cancellation stops on the limit too, and the model is free for the next call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from mcp_sim.base.result import SimulationMeta, SimulationResult


class Deadline:
    """Whether the limit (seconds; 0 or less: none) ran out while the call was answered."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = threading.Event()


@contextmanager
def deadline(seconds: float, cancel: threading.Event) -> Iterator[Deadline]:
    """Set `cancel` once `seconds` have passed inside the block (a daemon timer, stopped on leaving it)."""
    limit = Deadline(seconds)
    if seconds <= 0:
        yield limit
        return

    def expire() -> None:
        limit.expired.set()
        cancel.set()

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield limit
    finally:
        timer.cancel()


def timed_out(tool: str, limit: Deadline, stopped: SimulationMeta) -> SimulationResult:
    """The isError a client gets for a call stopped by the limit (`stopped`: what the stopped answer had
    said of itself); the world's history keeps nothing of it."""
    meta = replace(stopped, stage="timeout", details={**stopped.details, "call_timeout_s": limit.seconds})
    return SimulationResult(
        f"The simulation of '{tool}' was stopped after the call timeout of {limit.seconds:g} s (--call-timeout); "
        "nothing was executed. Raise --call-timeout, lower --max-tokens, or use a faster model.",
        is_error=True, simulation=meta)
