"""The simulator's answer to one call, free of MCP types, and the `_meta` key that carries its details.

It sits below everything that makes or changes an answer (calls, the simulator, fault rules, answer sources),
so each of those imports it downward: none of them needs the simulator to describe a result.

What mcp-sim says about an answer is one typed value (SimulationMeta), filled in as the answer is made and
settled; it becomes JSON, nested once under META_KEY, only where the answer leaves (`SimulationResult.meta`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

META_KEY = "mcp-sim/simulation"


@dataclass
class SimulationMeta:
    """`_meta["mcp-sim/simulation"]` of one answer."""

    simulated: bool = True
    model: str | None = None  # the engine that would answer (also when a source or a fault did)
    world: str | None = None
    scenario: str | None = None
    source: str | None = None  # what answered: model, fixture, cassette, cache, state, fault, miss
    # Where a failed call failed: arguments, world, client, queue, engine, output, timeout, fault, replay, fixture.
    stage: str | None = None
    turn: int | None = None  # the call's number in its world
    simulated_error: bool = False  # a tool failure the world model wrote (not a failure of the simulation)
    faults: list[dict[str, Any]] = field(default_factory=list)  # the labels of the faults applied
    state: dict[str, Any] | None = None  # what the call changed in the world's live data
    latency_ms: float | None = None
    # What made the answer, by who made it: tokens and attempts (the model), the fixture's pointer, the
    # cassette's origin, when it was cached, the prompt (--expose-prompt).
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"simulated": self.simulated}
        for name in ("model", "world", "scenario", "source", "stage", "turn"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        out.update(self.details)
        if self.simulated_error:
            out["simulated_error"] = True
        if self.faults:
            out["faults"] = list(self.faults)
        if self.state is not None:
            out["state"] = self.state
        if self.latency_ms is not None:
            out["latency_ms"] = self.latency_ms
        return out


@dataclass(frozen=True)
class ProtocolError:
    """A call answered with a JSON-RPC error instead of a result (an injected `protocol_error` fault)."""

    code: int
    message: str


@dataclass
class SimulationResult:
    """What a client receives, free of MCP types: the MCP layer maps it onto CallToolResult."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    simulation: SimulationMeta = field(default_factory=SimulationMeta)
    # What the world's history keeps of this answer (None: nothing, e.g. a cancelled or unusable answer).
    observation: str | None = None
    # The answer has no content block at all (an `empty` fault); `text` is then unused.
    no_content: bool = False
    # The MCP content blocks (as on the wire) when the answer is more than one plain text block: images,
    # audio, resources, several blocks, annotations. `text` is then what the model sees of them
    # (mcp_sim.base.content.content_text); a fault that rewrites `text` makes the MCP layer send the text instead.
    content: list[dict[str, Any]] | None = None
    # _meta keys of the result besides mcp-sim's own (a fixture's or a recorded result's), sent as they are.
    result_meta: dict[str, Any] | None = None
    # Set when the call ends in a JSON-RPC error rather than a result; `text` then says the same for logs.
    protocol_error: ProtocolError | None = None
    # What a recorded call's server sent the client during it (a cassette's `interactions`), sent again
    # before the result (mcp_sim.core.call_interactions.replay_interactions).
    interactions: list[dict[str, Any]] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """mcp-sim's part of the result's `_meta`, as sent: its fields nested once under META_KEY."""
        return {META_KEY: self.simulation.to_json()}


def failure(text: str, stage: str, **details: Any) -> SimulationResult:
    """An isError answer of the simulation itself (not of the simulated tool), failed at STAGE."""
    return SimulationResult(text, is_error=True, simulation=SimulationMeta(stage=stage, details=details))
