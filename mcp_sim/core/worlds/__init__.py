"""Worlds: the simulated state every call is answered in (a scenario plus the history of its calls)."""

from mcp_sim.core.worlds.registry import Worlds
from mcp_sim.core.worlds.world import DEFAULT_WORLD, World, WorldError, check_world_name

__all__ = ["DEFAULT_WORLD", "World", "WorldError", "Worlds", "check_world_name"]
