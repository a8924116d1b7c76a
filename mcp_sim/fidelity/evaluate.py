"""Replay recorded sessions against a simulator and score every step against the real result.

Two modes, as the AgentWorld evaluations run them:
- closed loop: one simulated session per recorded session; the simulator sees its own earlier
  answers, as it would while serving an agent;
- teacher-forced: before each step the simulator's history holds the REAL earlier results, so an
  early mistake does not spoil every later step and each step is scored on its own.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.base.result import SimulationResult
from mcp_sim.core.calls import Call
from mcp_sim.core.prompt import Turn, render_action, render_observation
from mcp_sim.core.simulator import Simulator, UnknownToolError
from mcp_sim.core.specs import ToolSpec
from mcp_sim.fidelity.scoring import METRICS, Observation, StepScores, score_step
from mcp_sim.rehearsal.sources import recorded_answer
from mcp_sim.rehearsal.traces import TraceRecord, sessions

logger = logging.getLogger(__name__)

MODES = ("closed", "forced")
MODE_TITLES = {"closed": "closed loop", "forced": "teacher-forced"}


class Responder(Protocol):
    """Whatever answers the replayed calls: the simulator, or (to test the harness) a stand-in."""

    def respond(self, session_id: str, record: TraceRecord) -> Observation:
        """Answer `record`'s call; only its tool and arguments may be used, its result is the answer key."""
        ...

    def observe(self, session_id: str, record: TraceRecord) -> None:
        """Put the real result of `record` into the session's history (teacher forcing)."""
        ...


class RealResults:
    """An answer source that gives a world the real result it is handed, once: teacher forcing goes through
    the simulator's own call path, so the real result lands in the history and in the live state alike
    (a state-answered read must agree with the real history beside it)."""

    name = "trace"

    def __init__(self) -> None:
        self.pending: dict[str, Observation] = {}

    def answer(self, call: Call) -> SimulationResult | None:
        real = self.pending.pop(call.world.name, None)
        if real is None:
            return None
        return recorded_answer(call.tool, real.text, real.structured, real.is_error)


class SimulatorResponder:
    """Answers with a Simulator; one world per replayed session gives closed-loop behaviour for free."""

    def __init__(self, simulator: Simulator):
        self.simulator = simulator
        real = next((source for source in simulator.sources if isinstance(source, RealResults)), None)
        if real is None:
            raise ValueError("teacher forcing hands the real results to the simulator: build it with "
                             "sources=[RealResults()] (mcp_sim.fidelity.evaluate) first")
        self._real = real

    def respond(self, session_id: str, record: TraceRecord) -> Observation:
        try:
            result = self.simulator.simulate(record.tool, record.arguments, session_id)
        except UnknownToolError as exc:
            return Observation(str(exc), None, True)
        except McpSimError as exc:  # an engine failure is a failed answer, not a failed evaluation
            logger.error("simulating %s failed: %s", record.tool, exc)
            return Observation(f"Simulation failed: {exc}", None, True)
        return Observation(result.text, result.structured, result.is_error)

    def observe(self, session_id: str, record: TraceRecord) -> None:
        try:
            tool = self.simulator.tool(record.tool)
        except UnknownToolError:
            return
        self._real.pending[session_id] = Observation.from_wire(record.result)
        self.simulator.simulate(record.tool, record.arguments, session_id)
        if self._real.pending.pop(session_id, None) is not None:
            # Arguments the spec refuses never reach an answer source: the history gets the real turn alone.
            assert tool.spec_set is not None
            real = Observation.from_wire(record.result)
            turn = Turn(render_action(record.tool, record.arguments), render_observation(real.structured, real.text))
            worlds = self.simulator.worlds
            worlds.record(worlds.get(session_id), tool.spec_set.source, turn)


# Recorded session names become world names, which allow fewer characters.
_WORLD_UNSAFE = re.compile(r"[^A-Za-z0-9._:@-]")


class Judge(Protocol):
    def rate(self, tool: ToolSpec | None, history: Sequence[TraceRecord], record: TraceRecord,
             simulated: Observation) -> dict[str, float] | None: ...


@dataclass
class StepResult:
    mode: str
    session: str
    step: int
    tool: str
    real: Observation
    simulated: Observation
    scores: StepScores
    seconds: float
    server: str = ""  # the real server's name, as the trace recorded it

    def to_json(self, max_chars: int = 400) -> dict[str, Any]:
        scores = {k: v for k, v in vars(self.scores).items()}
        return {"mode": self.mode, "session": self.session, "step": self.step, "tool": self.tool,
                "server": self.server, "real_error": self.real.is_error,
                "simulated_error": self.simulated.is_error, "simulated": self.simulated.text[:max_chars],
                "seconds": round(self.seconds, 2), **scores}

    @classmethod
    def from_json(cls, step: dict[str, Any]) -> StepResult:
        """A step of a written report, enough to summarize again (the texts are as the report cut them)."""
        fields: dict[str, Any] = {name: step.get(name) for name in (*METRICS, "judge")}
        scores = StepScores(**fields)
        return cls(step["mode"], step["session"], step["step"], step["tool"],
                   Observation("", None, bool(step.get("real_error"))),
                   Observation(step.get("simulated", ""), None, bool(step.get("simulated_error"))), scores,
                   float(step.get("seconds", 0.0)), step.get("server", ""))


def evaluate(records: Sequence[TraceRecord], responder: Responder, tools: Mapping[str, ToolSpec],
             modes: Sequence[str] = MODES, judge: Judge | None = None,
             on_step: Callable[[StepResult], None] | None = None,
             rel_tol: float = defaults.REL_TOL) -> list[StepResult]:
    """Score every recorded step in each mode; `tools` supplies output schemas (and context for a judge)."""
    run = uuid.uuid4().hex[:8]  # keeps this run's simulated sessions apart from any earlier run's
    results: list[StepResult] = []
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        for name, steps in sessions(records).items():
            for index, record in enumerate(steps):
                session_id = f"{run}:{mode}:{_WORLD_UNSAFE.sub('-', name)}"
                if mode == "forced":
                    # A fresh session per step, seeded with the real history up to this step.
                    session_id += f":{index}"
                    for earlier in steps[:index]:
                        responder.observe(session_id, earlier)
                result = _score(mode, session_id, name, steps[:index], record, responder, tools, judge,
                                rel_tol)
                results.append(result)
                if on_step is not None:
                    on_step(result)
    return results


def _score(mode: str, session_id: str, session: str, earlier: Sequence[TraceRecord], record: TraceRecord,
           responder: Responder, tools: Mapping[str, ToolSpec], judge: Judge | None,
           rel_tol: float) -> StepResult:
    started = time.perf_counter()
    simulated = responder.respond(session_id, record)
    seconds = time.perf_counter() - started
    real = Observation.from_wire(record.result)
    tool = tools.get(record.tool)
    written = [r.arguments for r in earlier if not r.is_error]
    # The schema the real tool declares: a text_json tool's inferred one is for answering, not for scoring.
    declared = tool.output_schema if tool is not None and tool.text_json is None else None
    scores = score_step(real, simulated, declared, written, record.arguments, rel_tol)
    if judge is not None:
        scores.judge = judge.rate(tool, earlier, record, simulated)
    return StepResult(mode, session, record.step, record.tool, real, simulated, scores, seconds, record.server)


class ReplayResponder:
    """Answers every call with the real recorded result: the harness's own honesty check."""

    def respond(self, session_id: str, record: TraceRecord) -> Observation:
        return Observation.from_wire(record.result)

    def observe(self, session_id: str, record: TraceRecord) -> None:
        pass
