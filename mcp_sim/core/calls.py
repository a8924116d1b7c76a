"""One call on its way through the simulator, and the hooks that may answer, change or watch it.

The simulator asks its answer sources in order (fixtures, cassettes of real traces, the response cache)
before the model; fault hooks may answer first or change the answer; observers (the cache, the ledger)
see every answer once it is final. All of them are plain objects: no MCP in sight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp_sim.base.result import META_KEY, SimulationResult
from mcp_sim.core.prompt import Turn
from mcp_sim.core.specs import ToolSpec
from mcp_sim.core.worlds.world import World
from mcp_sim.state.live import LiveData
from mcp_sim.state.plan import StatePlan

# The result type lives one floor lower (result.py) so fault rules can use it without importing the simulator;
# it stays importable from here, beside the call it answers.
__all__ = ["META_KEY", "AnswerSource", "Call", "CallObserver", "FaultHook", "SimulationResult"]


@dataclass
class Call:
    tool: ToolSpec
    arguments: dict[str, Any]
    world: World
    source: str  # the spec file answering it: one world keeps one history per file
    number: int  # this call's number in its world, from 1
    action: str  # the call as the model sees it
    system: str  # the system prompt of its spec file in its world's scenario
    history: list[Turn]  # the world's earlier turns of this spec file that go into prompts
    seed: int | None
    cancel: threading.Event = field(default_factory=threading.Event)
    on_progress: Callable[[int, int], None] | None = None
    # How many turns of this spec file the world held before this call, also those left out of prompts:
    # `world.turns[source][:turns_before]` is the whole history this call was answered after.
    turns_before: int = 0
    # What the client answered to the requests the tool sent it before answering (elicitation, sampling,
    # roots: mcp_sim.core.interactions); part of the action the model sees and of the world's history.
    client: dict[str, Any] | None = None
    # The live data of this spec file in this world, and what it says about this call (x-sim.state).
    live: LiveData | None = None
    state: StatePlan | None = None
    # The live data's digest before this call (part of its response-cache key).
    state_digest: str | None = None
    # The values the tool's x-sim.rules give this call (state.field_rules), by JSON pointer.
    rule_pins: dict[str, Any] = field(default_factory=dict)


class AnswerSource(Protocol):
    """Answers a call without the model, or passes (None)."""

    name: str  # what `_meta["mcp-sim/simulation"]["source"]` says: "fixture", "cassette", "cache"

    def answer(self, call: Call) -> SimulationResult | None: ...


class CallObserver(Protocol):
    """Sees every final answer, after the world recorded it (the cache stores it, the ledger writes it)."""

    def observed(self, call: Call, result: SimulationResult, source: str) -> None: ...


class FaultHook(Protocol):
    """Bad days on demand: answer before anything else does (a scripted failure), or change the answer."""

    def before(self, call: Call) -> SimulationResult | None: ...

    def after(self, call: Call, result: SimulationResult) -> SimulationResult: ...
