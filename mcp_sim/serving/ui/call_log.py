"""What a world's store does not keep of a call and the page shows: what answered it, how long it took, which
faults changed it. An observer of every settled call, in this process only, for the most recent calls."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from mcp_sim.base import defaults
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.rehearsal.ledger_observer import applied_faults


@dataclass(frozen=True)
class CallDetails:
    source: str  # state, model, fixture, cassette, cache, fault, ...
    latency_ms: float | None
    faults: tuple[str, ...]
    is_error: bool
    at: float  # when it was answered (epoch seconds)
    # The turn as stored: details apply to a stored turn only when both match, so a world reset (or deleted
    # and made again) under the same name never borrows the details of the calls it lost.
    action: str
    observation: str


class CallLog:
    """A CallObserver; details by (world, spec file, turn index), the oldest forgotten past `limit`."""

    def __init__(self, limit: int = defaults.UI_CALL_DETAILS):
        self._limit = limit
        self._details: OrderedDict[tuple[str, str, int], CallDetails] = OrderedDict()
        self._lock = threading.Lock()

    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        if result.observation is None:  # nothing was recorded in the world
            return
        simulation = result.simulation
        details = CallDetails(source, simulation.latency_ms, tuple(applied_faults(simulation.faults)),
                              result.is_error, time.time(), call.action, result.observation)
        with self._lock:
            self._details[(call.world.name, call.source, call.turns_before)] = details
            while len(self._details) > self._limit:
                self._details.popitem(last=False)

    def details(self, world: str, source: str, index: int, action: str, observation: str) -> CallDetails | None:
        """What this process saw of turn INDEX of SOURCE in WORLD, if it answered that very turn."""
        with self._lock:
            found = self._details.get((world, source, index))
        if found is None or found.action != action or found.observation != observation:
            return None
        return found
