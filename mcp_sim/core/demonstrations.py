"""Which of a tool's examples a prompt shows. Each tool's first SHOWN_EXAMPLES are demonstrations in the
shared system prompt (learn orders them farthest apart first, an error second); a call of a tool that has
more brings, after it, the NEAREST_EXAMPLES of the rest nearest to its own arguments. A spec can then hold
every distinct answer its traces taught without making every prompt longer, and a call sees the real
answers to the requests most like its own."""

from __future__ import annotations

from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.likeness import distance, features
from mcp_sim.core.specs import Example, SpecSet, ToolSpec


def visible(tool: ToolSpec, scenario: str) -> list[Example]:
    """TOOL's examples a world of SCENARIO may see: the general ones and the scenario's own."""
    return [example for example in tool.examples if example.scenario in (None, scenario)]


def shown_count(spec_set: SpecSet | None) -> int:
    """How many examples of each tool the system prompt shows: none when the spec's tools are indexed."""
    return 0 if spec_set is not None and spec_set.prompt_layout == "index" else defaults.SHOWN_EXAMPLES


def shown(tool: ToolSpec, scenario: str) -> list[Example]:
    """The examples of TOOL in the system prompt."""
    return visible(tool, scenario)[:shown_count(tool.spec_set)]


def unshown(tool: ToolSpec, scenario: str) -> list[Example]:
    """The examples of TOOL not in the system prompt; what a call may bring (part of its cache key)."""
    return visible(tool, scenario)[shown_count(tool.spec_set):]


def nearest(tool: ToolSpec, arguments: dict[str, Any], scenario: str, count: int = defaults.NEAREST_EXAMPLES
            ) -> list[Example]:
    """The COUNT unshown examples of TOOL nearest to ARGUMENTS, the nearest last (next to the call)."""
    target = features(arguments)
    ranked = sorted(unshown(tool, scenario), key=lambda example: distance(features(example.arguments), [target]))
    return ranked[:count][::-1]
