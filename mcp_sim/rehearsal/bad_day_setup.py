"""What `--faults` and `--ledger` (and the specs' x-sim.faults) give a simulator: the fault hook and the ledger."""

from __future__ import annotations

from mcp_sim.rehearsal.fault_hook import fault_injector
from mcp_sim.rehearsal.ledger import Ledger
from mcp_sim.rehearsal.ledger_observer import LedgerRecorder
from mcp_sim.rehearsal.settings import RehearsalSettings
from mcp_sim.simulator import Simulator


def attach_bad_day(simulator: Simulator, settings: RehearsalSettings) -> None:
    """Add the ledger observer and the fault hook that SETTINGS and the specs ask for.

    Raises at startup, before any call: LedgerError for an unwritable ledger, FaultFileError (every problem
    with its pointer) for a bad rule file or a rule that matches no tool."""
    recorder = LedgerRecorder(Ledger(settings.ledger)) if settings.ledger is not None else None
    if recorder is not None:
        simulator.observers.append(recorder)
    injector = fault_injector(simulator.catalog, simulator.model, settings.faults, simulator.options.seed)
    if injector is not None:
        simulator.faults = injector
