"""A resources/read the spec leaves to the world model, as a call in the world.

The read goes through the simulator's pipeline as a call of a synthetic text tool named `resources/read`
in the spec file that declares the resource (or the template it matches): same system prompt, same world
history, so later tool calls see what was read, and the cache, faults and observers see it too."""

from __future__ import annotations

from typing import Any

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.resources import ResourceSpec, TemplateSpec, find_resource
from mcp_sim.core.specs import Catalog, SpecSet, ToolSpec

READ_TOOL = "resources/read"
READ_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}


class UnknownResourceError(McpSimError):
    """No declared resource has this URI and no template matches it (a protocol error)."""


def read_target(catalog: Catalog, uri: str) -> ResourceSpec | TemplateSpec:
    """The declared resource or template that answers `uri`; UnknownResourceError when none does."""
    found = find_resource([spec_set.surface for spec_set in catalog.spec_sets], uri)
    if found is None:
        raise UnknownResourceError(f"Resource not found: {uri}")
    return found


def read_tool(catalog: Catalog, uri: str) -> ToolSpec:
    """The synthetic tool whose call reads `uri` in the world of the spec file that declares it."""
    target = read_target(catalog, uri)
    spec_set = _spec_set(catalog, target.source)
    description = target.declared.get("description") or target.declared.get("name")
    return ToolSpec(name=READ_TOOL, input_schema=READ_SCHEMA, description=description, source=spec_set.source,
                    spec_set=spec_set)


def _spec_set(catalog: Catalog, source: str) -> SpecSet:
    return next(spec_set for spec_set in catalog.spec_sets if spec_set.source == source)
