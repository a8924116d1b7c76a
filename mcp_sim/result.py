"""The simulator's answer to one call, free of MCP types, and the `_meta` key that carries its details.

It sits below everything that makes or changes an answer (calls, the simulator, fault rules, answer sources),
so each of those imports it downward: none of them needs the simulator to describe a result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

META_KEY = "mcp-sim/simulation"


@dataclass
class SimulationResult:
    """What a client receives, free of MCP types: the MCP layer maps it onto CallToolResult."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    # Until the simulator settles the answer, the fields of _meta["mcp-sim/simulation"]; then the whole
    # _meta of the result, those fields under META_KEY.
    meta: dict[str, Any] = field(default_factory=dict)
    # What the world's history keeps of this answer (None: nothing, e.g. a cancelled or unusable answer).
    observation: str | None = None
    # The answer has no content block at all (an `empty` fault); `text` is then unused.
    no_content: bool = False
    # The MCP content blocks (as on the wire) when the answer is more than one plain text block: images,
    # audio, resources, several blocks, annotations. `text` is then what the model sees of them
    # (mcp_sim.content.content_text); a fault that rewrites `text` makes the MCP layer send the text instead.
    content: list[dict[str, Any]] | None = None
    # _meta keys of the result besides mcp-sim's own (a fixture's or a recorded result's), sent as they are.
    result_meta: dict[str, Any] | None = None
    # What a recorded call's server sent the client during it (a cassette's `interactions`), sent again
    # before the result (mcp_sim.call_interactions.replay_interactions).
    interactions: list[dict[str, Any]] | None = None
