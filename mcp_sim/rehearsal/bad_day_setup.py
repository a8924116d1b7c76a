"""What `--faults` and `--ledger` (and the specs' x-sim.faults) give a simulator: the fault hook and the ledger."""

from __future__ import annotations

from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.specs import Catalog
from mcp_sim.rehearsal.fault_hook import fault_injector
from mcp_sim.rehearsal.ledger import Ledger
from mcp_sim.rehearsal.ledger_observer import LedgerRecorder
from mcp_sim.rehearsal.parts import RehearsalParts
from mcp_sim.rehearsal.settings import RehearsalSettings


def bad_day_parts(catalog: Catalog, model: ModelAnswerer, seed: int | None, settings: RehearsalSettings,
                  parts: RehearsalParts) -> None:
    """Add to PARTS the ledger observer and the fault hook that SETTINGS and the specs ask for.

    Raises at startup, before any call: LedgerError for an unwritable ledger, FaultFileError (every problem
    with its pointer) for a bad rule file or a rule that matches no tool."""
    if settings.ledger is not None:
        parts.observers.append(LedgerRecorder(Ledger(settings.ledger)))
    parts.faults = fault_injector(catalog, model, settings.faults, seed)
