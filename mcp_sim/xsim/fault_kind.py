"""What a fault kind is: its name, its parameters (with their defaults), its phase, and its effect.

Phases: `before` kinds act before any answer is made (wait, hold, answer instead); `after` kinds reshape the
answer that was made; `protocol` kinds end the call with a JSON-RPC error instead of a result. Every outcome,
a protocol error included, is then settled by the simulator like any other answer, so every observer sees it.

A kind sees a call only through `FaultCall`, and a fired rule only through `Fired`: this module (and the kinds)
import nothing of the simulator, so the rule parser can list the kinds without pulling the runtime in.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from mcp_sim.base.result import ProtocolError, SimulationResult

Phase = Literal["before", "after", "protocol"]
Details = dict[str, Any]


class Fired(Protocol):
    """A rule that fired on one call (mcp_sim.xsim.faults.Fault)."""

    @property
    def token(self) -> int:
        """A seeded number for the fault's own choices (which injection, which field)."""
        ...

    def parameter(self, name: str) -> Any:
        """The rule's value for NAME, else the kind's default."""
        ...

    def label(self, details: Details | None = None) -> Details:
        """What names the fault in the result's _meta and in the log."""
        ...


@dataclass
class Subject:
    """The call an after-model fault reshapes the answer of."""

    tool_name: str
    output_schema: dict[str, Any] | None
    earlier: Sequence[SimulationResult] = ()  # this tool's earlier results in this world (`stale`)


@dataclass
class FaultCall(Subject):
    """The call a before-model fault acts on, with what it may do to it."""

    cancel: threading.Event = field(default_factory=threading.Event)
    hold_s: float = 0.0  # how long a call nobody cancels may be held (`timeout`)

    def world_failure(self, message: str) -> SimulationResult:
        """An isError the world keeps in its history, as the tool reports failures."""
        raise NotImplementedError

    def written_failure(self, instruction: str) -> SimulationResult | None:
        """A failure the world model writes under INSTRUCTION; None when no attempt gave one."""
        raise NotImplementedError


class FaultKind:
    """One kind of fault. Subclass BeforeModel, AfterModel or ProtocolKind, and register it in fault_kinds.py."""

    name: ClassVar[str]
    phase: ClassVar[Phase]
    # Its parameters by name, with the default a rule that leaves one out gets (None: no default).
    parameters: ClassVar[Mapping[str, Any]] = {}
    # Parameters not repeated in the fault's label (long texts).
    unlabelled: ClassVar[frozenset[str]] = frozenset()


class BeforeModel(FaultKind):
    phase: ClassVar[Phase] = "before"

    def before(self, fault: Fired, call: FaultCall) -> SimulationResult | None:
        """A result (labelled) that ends the call, or None to let it go on (it is then labelled with the fault)."""
        raise NotImplementedError


class AfterModel(FaultKind):
    phase: ClassVar[Phase] = "after"

    def after(self, fault: Fired, result: SimulationResult, subject: Subject) -> tuple[SimulationResult, Details]:
        """RESULT as this fault shapes it, and what the label adds; only successful results come here."""
        raise NotImplementedError


class ProtocolKind(FaultKind):
    phase: ClassVar[Phase] = "protocol"

    def protocol_error(self, fault: Fired) -> ProtocolError:
        """The JSON-RPC error the call ends in."""
        raise NotImplementedError
