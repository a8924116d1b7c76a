"""The MCP features a server has besides its tools, resources and prompts: logging/setLevel, completion/complete
and resources/subscribe. A simulated server has them all, so an agent can be rehearsed against any server.

Completions come from what the specs know of a name: `x-sim.completions` of the prompt or template, else the
`enum`, `examples` and `default` of a tool argument of the same name in the same spec file; otherwise none.
Subscriptions: after a call that may change its world (any tool not marked readOnlyHint), every subscriber in
that world is told its resources were updated (notifications/resources/updated), except resources whose
content the spec writes (they never change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

from mcp_sim.call_interactions import LogLevels, connection_of
from mcp_sim.resources import PromptSpec, TemplateSpec, find_prompt
from mcp_sim.specs import Catalog, ToolSpec

logger = logging.getLogger(__name__)

RequestContext = ServerRequestContext[Any, Any]
WorldOf = Callable[[RequestContext], tuple[str, "str | None"]]
MAX_COMPLETIONS = 100  # the most values one completion/complete answer may carry (MCP)


def logging_handler(levels: LogLevels) -> dict[str, Any]:
    async def set_level(ctx: RequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.set(ctx, params.level)
        return types.EmptyResult()

    return {"on_set_logging_level": set_level}


def completion_handler(catalog: Catalog,
                       known_keys: Callable[[RequestContext, str], list[str]] | None = None) -> dict[str, Any]:
    """completion/complete: the spec's values for the argument, then the keys of the caller's world's
    records that an argument of that name names (`ticket_id` -> T-5001, ..., and those created since)."""

    async def complete(ctx: RequestContext, params: types.CompleteRequestParams) -> types.CompleteResult:
        values = completions(catalog, params.ref, params.argument.name)
        if known_keys is not None and _refers(catalog, params.ref):
            values = list(dict.fromkeys([*values, *known_keys(ctx, params.argument.name)]))
        typed = params.argument.value.casefold()
        matching = [value for value in values if value.casefold().startswith(typed)]
        return types.CompleteResult(completion=types.Completion(
            values=matching[:MAX_COMPLETIONS], total=len(matching), has_more=len(matching) > MAX_COMPLETIONS))

    return {"on_completion": complete}


def _refers(catalog: Catalog, ref: types.PromptReference | types.ResourceTemplateReference) -> bool:
    """REF names a prompt or template some spec declares."""
    surfaces = [spec_set.surface for spec_set in catalog.spec_sets]
    if isinstance(ref, types.PromptReference):
        return find_prompt(surfaces, ref.name) is not None
    return any(t.uri_template == ref.uri for s in surfaces for t in s.templates)


def completions(catalog: Catalog, ref: types.PromptReference | types.ResourceTemplateReference,
                name: str) -> list[str]:
    """The values the specs know for argument NAME of the prompt or template REF, in order, once each."""
    surfaces = [spec_set.surface for spec_set in catalog.spec_sets]
    target: PromptSpec | TemplateSpec | None
    if isinstance(ref, types.PromptReference):
        target = find_prompt(surfaces, ref.name)
    else:
        target = next((t for s in surfaces for t in s.templates if t.uri_template == ref.uri), None)
    if target is None:
        return []
    if name in target.completions:
        return list(dict.fromkeys(target.completions[name]))
    tools = [tool for tool in catalog.tools.values() if tool.source == target.source]
    return list(dict.fromkeys(_argument_values(tools, name)))


def _argument_values(tools: Iterable[ToolSpec], name: str) -> Iterable[str]:
    for tool in tools:
        schema = (tool.input_schema.get("properties") or {}).get(name)
        if not isinstance(schema, dict):
            continue
        for key in ("enum", "examples"):
            if isinstance(schema.get(key), list):
                yield from (str(value) for value in schema[key] if value is not None)
        if "default" in schema and schema["default"] is not None:
            yield str(schema["default"])
        for example in tool.examples:
            if name in example.arguments and example.arguments[name] is not None:
                yield str(example.arguments[name])


@dataclass
class Subscriptions:
    """Which client connection watches which URI, and from which world."""

    _watchers: dict[str, dict[int, tuple[str, Any]]] = field(default_factory=dict)

    def handlers(self, world_of: WorldOf) -> dict[str, Any]:
        async def subscribe(ctx: RequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
            self._watchers.setdefault(str(params.uri), {})[id(connection_of(ctx))] = (world_of(ctx)[0], ctx.session)
            return types.EmptyResult()

        async def unsubscribe(ctx: RequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
            self._watchers.get(str(params.uri), {}).pop(id(connection_of(ctx)), None)
            return types.EmptyResult()

        return {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}

    async def changed(self, world: str, tool: ToolSpec, unchanging: Callable[[str], bool]) -> None:
        """TOOL was just answered in WORLD: tell the world's subscribers their resources may have changed."""
        if (tool.annotations or {}).get("readOnlyHint"):
            return
        for uri, watchers in list(self._watchers.items()):
            if unchanging(uri):
                continue
            for key, (watched_world, session) in list(watchers.items()):
                if watched_world != world:
                    continue
                try:
                    await session.send_resource_updated(uri)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    watchers.pop(key, None)  # that client is gone
                except Exception:  # best effort: never fail the call that changed the world
                    logger.debug("resources/updated to a subscriber failed", exc_info=True)

