"""What the rehearsal options give a simulator: answer sources, observers and faults."""

from __future__ import annotations

from mcp_sim.rehearsal.bad_day_setup import attach_bad_day
from mcp_sim.rehearsal.replay_setup import attach_replay
from mcp_sim.rehearsal.settings import RehearsalSettings
from mcp_sim.simulator import Simulator

__all__ = ["RehearsalSettings", "attach"]  # the settings live in settings.py, which the attach_* modules import


def attach(simulator: Simulator, settings: RehearsalSettings) -> None:
    """Give `simulator` the sources, observers and faults that `settings` ask for."""
    attach_replay(simulator, settings)
    attach_bad_day(simulator, settings)  # --faults, x-sim.faults and --ledger
