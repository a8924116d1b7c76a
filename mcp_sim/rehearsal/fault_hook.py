"""The fault hook: applies a FaultPlan to the calls of a simulator, in its worker thread.

Each fired rule acts in its kind's phase (mcp_sim/xsim/fault_kinds.py): before the model (wait, hold,
answer instead), instead of a result (a JSON-RPC error, carried by the result as `protocol_error`), or after
the model (reshape the answer). Whatever comes out is an ordinary answer the simulator settles, so every
observer (the ledger, the cache) sees it. Every applied fault is listed in `_meta["mcp-sim/simulation"]
["faults"]` and logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.result import SimulationMeta
from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.prompt import parse_error, render_error
from mcp_sim.core.specs import Catalog, ToolSpec
from mcp_sim.xsim.fault_kind import AfterModel, BeforeModel, Details, FaultCall, ProtocolKind, Subject
from mcp_sim.xsim.fault_kinds import FAULT_KINDS, failed, labelled
from mcp_sim.xsim.faults import (
    AFTER_MODEL,
    Fault,
    FaultFileError,
    FaultPlan,
    FaultRule,
    ResultMemory,
    load_faults,
    unmatched,
)

logger = logging.getLogger(__name__)


@dataclass
class _Pending:
    """What `before` leaves for `after` on a call it let through."""

    faults: list[Fault]  # the after-model faults still to apply
    labels: list[Details] = field(default_factory=list)  # faults already applied (latency)


@dataclass
class _OnCall(FaultCall):
    """A call as the before-model kinds see it: they may fail it in the world or have the model write a failure."""

    call: Call | None = None
    model: ModelAnswerer | None = None

    def world_failure(self, message: str) -> SimulationResult:
        observation = render_error(message, self.output_schema is not None)
        return SimulationResult(message, is_error=True, observation=observation)

    def written_failure(self, instruction: str) -> SimulationResult | None:
        assert self.call is not None and self.model is not None
        tool = self.call.tool
        written = self.model.failure(self.call, instruction, lambda answer: error_from_model(answer, tool))
        if written is not None:
            logger.info("fault error on %s: the world model wrote %r", tool.name, written.text)
        return written


class FaultInjector:
    """A FaultHook over a FaultPlan: deterministic under the plan's seed, thread-safe."""

    def __init__(self, plan: FaultPlan, model: ModelAnswerer, *,
                 timeout_hold_s: float = defaults.FAULT_TIMEOUT_HOLD_S):
        self.plan = plan
        self.model = model
        self.timeout_hold_s = timeout_hold_s
        self.memory = ResultMemory() if "stale" in plan.kinds else None
        self._pending: dict[int, _Pending] = {}  # by id(call): a Call lives from `before` to `after`

    def before(self, call: Call) -> SimulationResult | None:
        self._pending.pop(id(call), None)  # left by an earlier call whose model failed, at a reused id
        faults = self.plan.decide(call.world.name, call.tool.name)
        pending = _Pending([f for f in faults if f.kind in AFTER_MODEL])
        on_call = _OnCall(call.tool.name, call.tool.output_schema, cancel=call.cancel, hold_s=self.timeout_hold_s,
                          call=call, model=self.model)
        for fault in faults:
            kind = FAULT_KINDS[fault.kind]
            if isinstance(kind, ProtocolKind):
                error = kind.protocol_error(fault)
                answer = failed(f"JSON-RPC error {error.code}: {error.message}", fault.label())
                _log(call, fault, answer)
                return replace(_with_labels(answer, pending.labels), protocol_error=error)
            if not isinstance(kind, BeforeModel):
                continue
            answered = kind.before(fault, on_call)
            if answered is None:
                pending.labels.append(fault.label())
                _log_entry(call, fault, pending.labels[-1])
                continue
            _log(call, fault, answered)
            return _with_labels(answered, pending.labels)
        if faults:
            self._pending[id(call)] = pending
        return None

    def after(self, call: Call, result: SimulationResult) -> SimulationResult:
        pending = self._pending.pop(id(call), None)
        fresh = result
        if pending is not None:
            earlier = self.memory.earlier(call.world.name, call.tool.name) if self.memory is not None else []
            for fault in pending.faults:
                result = transform(fault, result, call.tool, earlier)
                _log(call, fault, result)
            result = _with_labels(result, pending.labels)
        if self.memory is not None:  # the world's own answer, not a reshaped one, is what `stale` repeats
            self.memory.remember(call.world.name, call.tool.name,
                                 replace(fresh, simulation=SimulationMeta(turn=call.number)))
        return result


def transform(fault: Fault, result: SimulationResult, tool: ToolSpec,
              earlier: Sequence[SimulationResult] = ()) -> SimulationResult:
    """RESULT as FAULT (an after-model kind) shapes it, labelled; EARLIER: this tool's earlier results in the world.

    A failed call is left as it is (and the label says so): these faults shape answers, not failures.
    """
    kind = FAULT_KINDS[fault.kind]
    if not isinstance(kind, AfterModel):
        raise ValueError(f"{fault.kind!r} is not applied after the model (after-model kinds: {sorted(AFTER_MODEL)})")
    if result.is_error:
        return labelled(result, fault.label({"note": "not applied: the call failed"}))
    changed, details = kind.after(fault, result, Subject(tool.name, tool.output_schema, earlier))
    return labelled(changed, fault.label(details))


def error_from_model(answer: str, tool: ToolSpec) -> str | None:
    """The failure message in the model's {"error": ...} ANSWER, as TOOL reports it; None when there is none.

    A text tool's failure reads as its error line ("Error: ..."), as `--simulate-errors` answers it.
    """
    try:
        message = parse_error(json.loads(answer, strict=False), structured=True)
    except json.JSONDecodeError:
        return None
    if message is None or tool.output_schema is not None or message.startswith("Error:"):
        return message
    return f"Error: {message}"


def _log(call: Call, fault: Fault, result: SimulationResult) -> None:
    _log_entry(call, fault, result.simulation.faults[-1])


def _log_entry(call: Call, fault: Fault, entry: dict[str, Any]) -> None:
    logger.info("fault %s applied to %s in world %s: %s", fault.kind, call.tool.name, call.world.name, entry)


def _with_labels(result: SimulationResult, entries: list[Details]) -> SimulationResult:
    """RESULT with ENTRIES, applied earlier, listed before the faults it names already."""
    if not entries:
        return result
    return replace(result, simulation=replace(result.simulation, faults=[*entries, *result.simulation.faults]))


def plan_rules(catalog: Catalog, faults_file: Path | None) -> list[FaultRule]:
    """The rules of FAULTS_FILE (each must match some tool) and of the specs' x-sim.faults; raise
    FaultFileError listing every problem with its pointer."""
    rules = load_faults(faults_file) if faults_file is not None else []
    problems = unmatched(rules, sorted(catalog.tools))
    if problems:
        raise FaultFileError(problems)
    return [*rules, *(rule for tool in catalog.tools.values() for rule in tool.faults)]


def fault_injector(catalog: Catalog, model: ModelAnswerer, faults_file: Path | None,
                   seed: int | None) -> FaultInjector | None:
    """The hook for a simulator over CATALOG, or None when no rule asks for faults."""
    rules = plan_rules(catalog, faults_file)
    if not rules:
        return None
    logger.info("fault injection: %d rule(s), seed %s", len(rules), seed or 0)
    return FaultInjector(FaultPlan(rules, seed=seed or 0), model)
