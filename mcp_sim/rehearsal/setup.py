"""What the rehearsal options give a simulator: answer sources, observers and faults, as RehearsalParts."""

from __future__ import annotations

from mcp_sim.core.model_answer import ModelAnswerer
from mcp_sim.core.simulator import SimOptions
from mcp_sim.core.specs import Catalog
from mcp_sim.engines.base import Engine
from mcp_sim.rehearsal.bad_day_setup import bad_day_parts
from mcp_sim.rehearsal.parts import RehearsalParts
from mcp_sim.rehearsal.replay_setup import replay_parts
from mcp_sim.rehearsal.settings import RehearsalSettings

__all__ = ["RehearsalParts", "RehearsalSettings", "rehearsal_parts"]


def rehearsal_parts(catalog: Catalog, engine: Engine, options: SimOptions, model: ModelAnswerer,
                    settings: RehearsalSettings) -> RehearsalParts:
    """The sources, observers and faults that SETTINGS ask for, for a simulator not built yet."""
    parts = RehearsalParts()
    replay_parts(catalog, engine, options, settings, parts)
    bad_day_parts(catalog, model, options.seed, settings, parts)  # --faults, x-sim.faults and --ledger
    return parts
