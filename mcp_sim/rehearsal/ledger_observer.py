"""The ledger's observer: every answered call of a tool that may change the world, written as it completes."""

from __future__ import annotations

import logging
from typing import Any

from mcp_sim.core.calls import Call, SimulationResult
from mcp_sim.rehearsal.ledger import Ledger, LedgerError

logger = logging.getLogger(__name__)

# An `oversized` fault may make a result megabytes long; the ledger keeps its start and says how much is left.
MAX_RESULT_CHARS = 16 * 1024


class LedgerRecorder:
    """A CallObserver that appends each call to a Ledger (read-only tools are skipped by the Ledger)."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger

    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        simulation = result.simulation
        try:
            self.ledger.record(annotations=call.tool.annotations, world=call.world.name, tool=call.tool.name,
                               arguments=call.arguments, is_error=result.is_error, result=_clipped(result.text),
                               structured=result.structured, faults=applied_faults(simulation.faults),
                               latency_ms=simulation.latency_ms, source=source, state=simulation.state)
        except LedgerError as exc:  # the call itself succeeded; a lost entry is loud, not fatal to the agent
            logger.error("ledger entry for %s lost: %s", call.tool.name, exc)


def applied_faults(labels: list[dict[str, Any]]) -> list[str]:
    """The kinds of the faults that changed this call (a label noting "not applied" does not count)."""
    return [entry["kind"] for entry in labels
            if not str(entry.get("note", "")).startswith("not applied")]


def _clipped(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return f"{text[:MAX_RESULT_CHARS]}… [{len(text) - MAX_RESULT_CHARS} more characters]"
