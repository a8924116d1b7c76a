"""The fault hook: applies a FaultPlan to the calls of a simulator, in its worker thread.

Before the model: `latency` waits, `timeout` waits for the client to give up, `protocol_error` raises
ProtocolFault (the server answers a JSON-RPC error), `error` and `rate_limit` answer at once, and an `error`
without a message is written by the world model. After it: `empty`, `oversized`, `malformed`, `injection` and
`stale` reshape the answer. Every applied fault is listed in `_meta["mcp-sim/simulation"]["faults"]` and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

from mcp_sim import defaults
from mcp_sim.calls import META_KEY, Call, CallObserver, SimulationResult
from mcp_sim.errors import ProtocolFault
from mcp_sim.model_answer import ModelAnswerer
from mcp_sim.prompt import render_error
from mcp_sim.rehearsal.fault_effects import (
    delay_seconds,
    error_from_model,
    error_result,
    immediate_result,
    is_timeout,
    model_error_instruction,
    needs_model_error,
    protocol_error,
    transform,
)
from mcp_sim.rehearsal.faults import (
    AFTER_MODEL,
    Fault,
    FaultFileError,
    FaultPlan,
    FaultRule,
    ResultMemory,
    label,
    load_faults,
    unmatched,
)
from mcp_sim.specs import Catalog

logger = logging.getLogger(__name__)

Labels = list[dict[str, Any]]


@dataclass
class _Pending:
    """What `before` leaves for `after` on a call it let through."""

    faults: list[Fault]  # the after-model faults still to apply
    labels: Labels = field(default_factory=list)  # faults already applied (latency)


class FaultInjector:
    """A FaultHook over a FaultPlan: deterministic under the plan's seed, thread-safe."""

    def __init__(self, plan: FaultPlan, model: ModelAnswerer, *, witness: CallObserver | None = None,
                 timeout_hold_s: float = defaults.FAULT_TIMEOUT_HOLD_S):
        self.plan = plan
        self.model = model
        # Told of the calls that a protocol_error ends before the simulator settles them (the ledger).
        self.witness = witness
        self.timeout_hold_s = timeout_hold_s
        self.memory = ResultMemory() if "stale" in plan.kinds else None
        self._pending: dict[int, _Pending] = {}  # by id(call): a Call lives from `before` to `after`

    def before(self, call: Call) -> SimulationResult | None:
        self._pending.pop(id(call), None)  # left by an earlier call whose model failed, at a reused id
        faults = self.plan.decide(call.world.name, call.tool.name)
        pending = _Pending([f for f in faults if f.kind in AFTER_MODEL])
        for fault in faults:
            if fault.kind in AFTER_MODEL:
                continue
            answered = self._before_model(call, fault, pending.labels)
            if answered is not None:
                return _with_labels(_flat(answered), pending.labels)
        if faults:
            self._pending[id(call)] = pending
        return None

    def after(self, call: Call, result: SimulationResult) -> SimulationResult:
        pending = self._pending.pop(id(call), None)
        fresh = result
        if pending is not None:
            result = self._after_model(call, result, pending)
        if self.memory is not None:  # the world's own answer, not a reshaped one, is what `stale` repeats
            self.memory.remember(call.world.name, call.tool.name,
                                 replace(fresh, meta={META_KEY: {"turn": call.number}}))
        return result

    def _before_model(self, call: Call, fault: Fault, labels: Labels) -> SimulationResult | None:
        """Apply one before-model fault: a result that ends the call, or None to go on (after a delay)."""
        delay = delay_seconds(fault)
        if delay is not None:
            call.cancel.wait(delay)  # a client that gives up meanwhile need not wait for the rest
            labels.append(_applied(fault, call))
            return None
        if is_timeout(fault):
            return self._hold(call, fault)
        if fault.kind == "protocol_error":
            self._raise_protocol_error(call, fault, labels)
        if needs_model_error(fault):
            return self._world_written_error(call, fault)
        scripted = immediate_result(fault, call.tool)
        if scripted is None:
            return None
        _log(call, fault, scripted.meta[META_KEY]["faults"][-1])
        if fault.kind == "error":  # a failure of the world: its history keeps it
            scripted.observation = render_error(scripted.text, call.tool.output_schema is not None)
        return scripted

    def _hold(self, call: Call, fault: Fault) -> SimulationResult:
        """`timeout`: no answer until the client cancels (its answer then goes nowhere) or the hold ends."""
        cancelled = call.cancel.wait(self.timeout_hold_s)
        entry = _applied(fault, call, {"cancelled": cancelled})
        text = (f"The call of '{call.tool.name}' was cancelled by the client while an injected timeout held it."
                if cancelled else f"No answer from '{call.tool.name}' within {self.timeout_hold_s:g} s "
                "(an injected timeout that no client cancelled).")
        return SimulationResult(text, is_error=True, meta={"stage": "fault", "faults": [entry]})

    def _raise_protocol_error(self, call: Call, fault: Fault, labels: Labels) -> NoReturn:
        code, message = protocol_error(fault)
        entries = [*labels, _applied(fault, call)]
        if self.witness is not None:  # the simulator never settles this call: tell the ledger here
            failed = SimulationResult(f"JSON-RPC error {code}: {message}", is_error=True,
                                      meta={META_KEY: {"simulated": True, "world": call.world.name,
                                                       "stage": "fault", "faults": entries}})
            self.witness.observed(call, failed, "fault")
        raise ProtocolFault(code, message)

    def _world_written_error(self, call: Call, fault: Fault) -> SimulationResult:
        """`error` without a message: the world model writes one that fits the world and the call."""
        instruction = model_error_instruction(call.tool)
        written = self.model.failure(call, instruction, lambda answer: error_from_model(answer, call.tool))
        if written is None:  # no attempt gave a usable message: fail anyway, and say why
            fallback = error_result(fault, f"Error calling tool '{call.tool.name}': the call failed "
                                           "(the simulated failure could not be written by the model)")
            fallback.observation = render_error(fallback.text, call.tool.output_schema is not None)
            return fallback
        logger.info("fault error on %s: the world model wrote %r", call.tool.name, written.text)
        return _with_labels(written, [_applied(fault, call, {"written_by": "model"})])

    def _after_model(self, call: Call, result: SimulationResult, pending: _Pending) -> SimulationResult:
        earlier = self.memory.earlier(call.world.name, call.tool.name) if self.memory is not None else []
        for fault in pending.faults:
            shaped = transform(fault, result, call.tool, earlier)
            if fault.kind == "empty" and not result.is_error:
                shaped = replace(shaped, no_content=True)
            result = shaped
            _log(call, fault, shaped.meta[META_KEY]["faults"][-1])
        return _with_labels(_flat(result), pending.labels)


def _applied(fault: Fault, call: Call, details: dict[str, Any] | None = None) -> dict[str, Any]:
    entry = label(fault, details)
    _log(call, fault, entry)
    return entry


def _log(call: Call, fault: Fault, entry: dict[str, Any]) -> None:
    logger.info("fault %s applied to %s in world %s: %s", fault.kind, call.tool.name, call.world.name, entry)


def _flat(result: SimulationResult) -> SimulationResult:
    """RESULT with the fields that faults.py nests under META_KEY lifted out: the simulator expects them flat
    until it settles the answer (it then nests them itself)."""
    nested = result.meta.get(META_KEY)
    if not isinstance(nested, dict):
        return result
    flat = {key: value for key, value in result.meta.items() if key != META_KEY}
    return replace(result, meta={**flat, **nested})


def _with_labels(result: SimulationResult, entries: Labels) -> SimulationResult:
    """RESULT (flat meta) with ENTRIES, applied earlier, listed before the faults it names already."""
    if not entries:
        return result
    return replace(result, meta={**result.meta, "faults": [*entries, *result.meta.get("faults", [])]})


def plan_rules(catalog: Catalog, faults_file: Path | None) -> list[FaultRule]:
    """The rules of FAULTS_FILE (each must match some tool) and of the specs' x-sim.faults; raise
    FaultFileError listing every problem with its pointer."""
    rules = load_faults(faults_file) if faults_file is not None else []
    problems = unmatched(rules, sorted(catalog.tools))
    if problems:
        raise FaultFileError(problems)
    return [*rules, *(rule for tool in catalog.tools.values() for rule in tool.faults)]


def fault_injector(catalog: Catalog, model: ModelAnswerer, faults_file: Path | None, seed: int | None,
                   witness: CallObserver | None = None) -> FaultInjector | None:
    """The hook for a simulator over CATALOG, or None when no rule asks for faults."""
    rules = plan_rules(catalog, faults_file)
    if not rules:
        return None
    logger.info("fault injection: %d rule(s), seed %s", len(rules), seed or 0)
    return FaultInjector(FaultPlan(rules, seed=seed or 0), model, witness=witness)

