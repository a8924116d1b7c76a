"""What the rehearsal options add to a simulator, as one value the application hands to its constructor."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_sim.core.calls import AnswerSource, CallObserver, FaultHook


@dataclass
class RehearsalParts:
    sources: list[AnswerSource] = field(default_factory=list)  # answer before the model, first match wins
    observers: list[CallObserver] = field(default_factory=list)  # see every settled outcome
    faults: FaultHook | None = None
    replay_only: bool = False  # no source answers: a miss, the model is never asked
