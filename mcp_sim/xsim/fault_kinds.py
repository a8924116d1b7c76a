"""Every fault kind, one class each, and the registry the rule parser and the fault hook read.

Adding a kind: a class here (or in its own module) deriving from BeforeModel, AfterModel or ProtocolKind
(mcp_sim/xsim/fault_kind.py), with its name, parameters and effect, and its line in FAULT_KINDS. A
parameter name no kind used before also needs its field, with its bounds, on FaultRule (faults.py).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any, ClassVar

from mcp_sim.base import defaults
from mcp_sim.base.result import ProtocolError, SimulationMeta, SimulationResult
from mcp_sim.xsim.fault_effects import (
    INJECTION_KEY,
    breakages,
    injections,
    place_injection,
    rejected_by_clients,
    rotated,
    smallest_valid,
)
from mcp_sim.xsim.fault_kind import (
    AfterModel,
    BeforeModel,
    Details,
    FaultCall,
    FaultKind,
    Fired,
    ProtocolKind,
    Subject,
)

PADDING_LINE = "[mcp-sim oversized result: padding]"


def failed(text: str, label: Details) -> SimulationResult:
    """The isError a fault answers with instead of the tool, labelled."""
    return SimulationResult(text, is_error=True, simulation=SimulationMeta(stage="fault", faults=[label]))


def labelled(result: SimulationResult, label: Details) -> SimulationResult:
    """A copy of RESULT whose _meta lists LABEL among its faults."""
    return replace(result, simulation=replace(result.simulation, faults=[*result.simulation.faults, label]))


# --- before the model ------------------------------------------------------------------------------------------

class Error(BeforeModel):
    """The call fails: with the rule's message, or (none given) with one the world model writes for the call.
    A failure of the world, so its history keeps it."""

    name = "error"
    parameters: ClassVar[dict[str, Any]] = {"message": None}

    def before(self, fault: Fired, call: FaultCall) -> SimulationResult | None:
        message = fault.parameter("message")
        if message is not None:
            return _as_fault(call.world_failure(message), fault.label())
        written = call.written_failure(self.instruction(call.tool_name))
        if written is None:  # no attempt gave a usable message: fail anyway, and say why
            return _as_fault(call.world_failure(f"Error calling tool '{call.tool_name}': the call failed (the "
                                                "simulated failure could not be written by the model)"), fault.label())
        return labelled(written, fault.label({"written_by": "model"}))

    @staticmethod
    def instruction(tool_name: str) -> str:
        """Text to add after the call's action so the world model answers with a failure instead of a result.

        The answer is decoded under `mcp_sim.core.prompt.error_schema(...)` for every tool (text tools too): the
        grammar gives the shape, so the words here only steer the content. Measured with SmolLM2-135M: naming a
        "<message>" placeholder or a reply format made it copy the placeholder; this wording gave fitting messages.
        """
        return (f"This call of {tool_name} fails in the world. Answer with the error object the tool returns, "
                "saying what went wrong for these arguments (for example a lock, a full disk, a lost connection or "
                "a missing item).")


def _as_fault(result: SimulationResult, label: Details) -> SimulationResult:
    return labelled(replace(result, simulation=replace(result.simulation, stage="fault")), label)


class RateLimit(BeforeModel):
    """The call is refused for now; the world is left alone."""

    name = "rate_limit"
    parameters: ClassVar[dict[str, Any]] = {"retry_after": defaults.FAULT_RETRY_AFTER_S}

    def before(self, fault: Fired, call: FaultCall) -> SimulationResult | None:
        return failed(f"Rate limit exceeded for tool '{call.tool_name}': retry after "
                      f"{fault.parameter('retry_after')} s", fault.label())


class Latency(BeforeModel):
    """The answer comes late (a client that gives up meanwhile need not wait for the rest)."""

    name = "latency"
    parameters: ClassVar[dict[str, Any]] = {"ms": defaults.FAULT_LATENCY_MS}

    def before(self, fault: Fired, call: FaultCall) -> SimulationResult | None:
        call.cancel.wait(self.seconds(fault))
        return None

    @staticmethod
    def seconds(fault: Fired) -> float:
        return float(fault.parameter("ms")) / 1000


class Timeout(BeforeModel):
    """No answer until the client cancels (its answer then goes nowhere) or the hold ends."""

    name = "timeout"

    def before(self, fault: Fired, call: FaultCall) -> SimulationResult | None:
        cancelled = call.cancel.wait(call.hold_s)
        text = (f"The call of '{call.tool_name}' was cancelled by the client while an injected timeout held it."
                if cancelled else f"No answer from '{call.tool_name}' within {call.hold_s:g} s (an injected "
                "timeout that no client cancelled).")
        return failed(text, fault.label({"cancelled": cancelled}))


# --- instead of a result ---------------------------------------------------------------------------------------

class ProtocolErrorKind(ProtocolKind):
    """The client gets a JSON-RPC error instead of a result."""

    name = "protocol_error"
    parameters: ClassVar[dict[str, Any]] = {"code": defaults.FAULT_PROTOCOL_ERROR_CODE,
                                            "message": defaults.FAULT_PROTOCOL_ERROR_MESSAGE}

    def protocol_error(self, fault: Fired) -> ProtocolError:
        return ProtocolError(int(fault.parameter("code")), str(fault.parameter("message")))


# --- after the model -------------------------------------------------------------------------------------------

class Empty(AfterModel):
    """A valid result with no content: for a tool with an outputSchema, the least structuredContent it allows."""

    name = "empty"

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        # Valid means what a client accepts: isError false and, for a tool with an outputSchema,
        # structuredContent present and conforming (clients reject its absence). So the content list is empty
        # and the structured value shrinks to the least the schema allows: optional properties dropped, arrays
        # emptied.
        if subject.output_schema is None or result.structured is None:
            return replace(result, text="", structured=None, no_content=True), {"note": "no content"}
        smallest = smallest_valid(result.structured, subject.output_schema)
        return replace(result, text="", structured=smallest, no_content=True), {
            "note": "no content; structuredContent reduced to what the outputSchema requires"}


class Oversized(AfterModel):
    """The text padded to a size (JSON stays the same JSON: trailing whitespace)."""

    name = "oversized"
    parameters: ClassVar[dict[str, Any]] = {"bytes": defaults.FAULT_OVERSIZED_BYTES}

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        size = int(fault.parameter("bytes"))
        current = len(result.text.encode())
        if current >= size:
            return result, {"note": f"not padded: the result is already {current} bytes"}
        missing = size - current
        padding = " " * missing if result.structured is not None else \
            ("\n" + PADDING_LINE * (missing // len(PADDING_LINE) + 1))[:missing]
        return replace(result, text=result.text + padding), {"note": f"text padded to {size} bytes"}


class Malformed(AfterModel):
    """structuredContent the tool's outputSchema rejects, as clients check it."""

    name = "malformed"

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        schema = subject.output_schema
        if schema is None:
            return result, {"note": "not applied: the tool has no outputSchema to break"}
        for how, broken in breakages(result.structured or {}, schema):
            if rejected_by_clients(broken, schema):
                return replace(result, structured=broken, text=json.dumps(broken, ensure_ascii=False)), {"note": how}
        # Nothing in the schema can be broken by value; a missing structuredContent still breaks the contract.
        return replace(result, structured=None), {"note": "structuredContent left out though the tool declares "
                                                          "an outputSchema"}


class Injection(AfterModel):
    """A prompt injection riding in a string field the schema lets carry it, else in the text."""

    name = "injection"
    parameters: ClassVar[dict[str, Any]] = {"text": None}
    unlabelled = frozenset({"text"})  # the label names the injection it placed

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        text = fault.parameter("text")
        corpus = [text] if text else rotated(injections(), fault.token)
        if subject.output_schema is not None and result.structured is not None:
            placed = place_injection(result.structured, subject.output_schema, corpus, fault.token)
            if placed is not None:
                structured, pointer, chosen = placed
                return (replace(result, structured=structured, text=json.dumps(structured, ensure_ascii=False)),
                        {"at": pointer, "injection": chosen})
        # A text tool, or no string field the schema lets carry one: the text content carries it.
        separator = "\n\n" if result.structured is not None else "\n"
        return replace(result, text=result.text + separator + corpus[0]), {"at": "text", "injection": corpus[0]}


class Stale(AfterModel):
    """An earlier result of the tool in this world, repeated."""

    name = "stale"

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        previous = next((r for r in reversed(subject.earlier) if not r.is_error), None)
        if previous is None:
            return result, {"note": "no earlier result of this tool in this world: result unchanged"}
        repeated = replace(result, text=previous.text, structured=copy.deepcopy(previous.structured))
        return repeated, {"note": "repeats an earlier result", "repeats_turn": previous.simulation.turn}


FAULT_KINDS: dict[str, FaultKind] = {kind.name: kind for kind in (
    Error(), RateLimit(), ProtocolErrorKind(), Latency(), Timeout(),
    Empty(), Oversized(), Malformed(), Injection(), Stale())}

__all__ = ["FAULT_KINDS", "INJECTION_KEY", "PADDING_LINE", "failed", "labelled"]
