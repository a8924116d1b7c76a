"""The MCP features a server has besides its tools, resources and prompts: logging/setLevel, completion/complete,
resources/subscribe and list_changed notifications. A simulated server has them all unless its specs declare
otherwise (mcp_sim.core.capabilities), so an agent can be rehearsed against any server.

Completions come from what the specs know of a name: `x-sim.completions` of the prompt or template, else the
`enum`, `examples` and `default` of a tool argument of the same name in the same spec file; otherwise none.
Subscriptions: after a call that may change its world (any tool not marked readOnlyHint), every subscriber in
that world is told its resources were updated (notifications/resources/updated), except resources whose
content the spec writes (they never change).
"""

from __future__ import annotations

import logging
import warnings
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)

from mcp_sim.core.call_interactions import LogLevels, connection_of
from mcp_sim.core.capabilities import Advertised, FileFeatures
from mcp_sim.core.resources import PromptSpec, TemplateSpec, find_prompt
from mcp_sim.core.specs import Catalog, ToolSpec

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


class Upstream(Protocol):
    """A real server whose resources the subscriptions watch too (shadow)."""

    async def subscribe(self, uri: str) -> None: ...

    async def unsubscribe(self, uri: str) -> None: ...


@dataclass
class Subscriptions:
    """Which client connection watches which URI, and from which world. With an `upstream`, a subscription is
    made there as well, and its resources/updated reach every watcher of the URI (`updated`)."""

    _watchers: dict[str, dict[int, tuple[str, Any]]] = field(default_factory=dict)
    upstream: Upstream | None = None

    def handlers(self, world_of: WorldOf) -> dict[str, Any]:
        async def subscribe(ctx: RequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
            uri = str(params.uri)
            if self.upstream is not None and not self._watchers.get(uri):
                await self.upstream.subscribe(uri)  # its refusal is the agent's error, as from the real server
            self._watchers.setdefault(uri, {})[id(connection_of(ctx))] = (world_of(ctx)[0], ctx.session)
            return types.EmptyResult()

        async def unsubscribe(ctx: RequestContext, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
            uri = str(params.uri)
            watchers = self._watchers.get(uri, {})
            if watchers.pop(id(connection_of(ctx)), None) is not None and not watchers and self.upstream is not None:
                await self.upstream.unsubscribe(uri)
            return types.EmptyResult()

        return {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}

    async def updated(self, uri: str) -> None:
        """The upstream server says URI changed: every watcher of it hears so, whatever its world."""
        for key, (_, session) in list(self._watchers.get(uri, {}).items()):
            await self._tell(session, uri, self._watchers[uri], key)

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
                await self._tell(session, uri, watchers, key)

    @staticmethod
    async def _tell(session: Any, uri: str, watchers: dict[int, tuple[str, Any]], key: int) -> None:
        try:
            await session.send_resource_updated(uri)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            watchers.pop(key, None)  # that client is gone
        except Exception:  # best effort: never fail the call that changed the world
            logger.debug("resources/updated to a subscriber failed", exc_info=True)



class Connections:
    """The client connections that can hear the server outside any request (stdio, a 2025-11-25 HTTP session
    with its standing stream), for list_changed and server log notifications. Filled by a middleware on every
    request; a closed connection drops out with its last reference."""

    def __init__(self) -> None:
        self._live: weakref.WeakSet[Any] = weakref.WeakSet()

    async def middleware(self, ctx: RequestContext, call_next: Callable[[RequestContext], Any]) -> Any:
        connection = connection_of(ctx)
        if getattr(connection, "has_standalone_channel", False):
            self._live.add(connection)
        return await call_next(ctx)

    def __len__(self) -> int:
        return len(self._live)

    async def list_changed(self, tools: bool, resources: bool, prompts: bool,
                           bus: InMemorySubscriptionBus | None = None) -> None:
        """notifications/{tools,resources,prompts}/list_changed to every connection (best effort: the SDK
        drops one whose stream is gone), and the same events to the 2026-07-28 clients listening on BUS."""
        if bus is not None:
            for changed, event in ((tools, ToolsListChanged()), (resources, ResourcesListChanged()),
                                   (prompts, PromptsListChanged())):
                if changed:
                    await bus.publish(event)
        for connection in list(self._live):
            if tools:
                await connection.send_tool_list_changed()
            if resources:
                await connection.send_resource_list_changed()
            if prompts:
                await connection.send_prompt_list_changed()

    async def log(self, levels: LogLevels, level: str, data: Any, logger_name: str = "mcp-sim") -> None:
        """A server log message to every connection whose client level lets it through."""
        for connection in list(self._live):
            if levels.allows_connection(connection, level):
                with warnings.catch_warnings():  # logging is deprecated as of 2026-07-28; older clients use it
                    warnings.simplefilter("ignore")
                    await connection.log(level, data, logger_name)


@dataclass
class Peers:
    """What a server keeps about its clients, unchanged when `serve --reload` swaps the specs under it."""

    levels: LogLevels = field(default_factory=LogLevels)
    subscriptions: Subscriptions = field(default_factory=Subscriptions)
    connections: Connections = field(default_factory=Connections)
    # Stateless 2026-07-28 clients hear list changes on a subscriptions/listen stream instead (serve --reload).
    bus: InMemorySubscriptionBus = field(default_factory=InMemorySubscriptionBus)
    listen: ListenHandler = field(init=False)

    def __post_init__(self) -> None:
        self.listen = ListenHandler(self.bus)


def file_features(catalog: Catalog) -> list[FileFeatures]:
    """What each spec file says of its server's capabilities (mcp_sim.core.capabilities.advertised reads it)."""
    return [FileFeatures(s.capabilities, bool(s.surface.resources or s.surface.templates), bool(s.surface.prompts))
            for s in catalog.spec_sets]


class AdvertisingServer(Server[Any]):
    """The SDK's low-level Server, advertising `listChanged` and `experimental` as the specs say (the SDK takes
    them as arguments of create_initialization_options, which its transports call without any)."""

    advertised: Advertised = Advertised()

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        said, given = self.advertised, notification_options or NotificationOptions()
        notification_options = NotificationOptions(prompts_changed=given.prompts_changed or said.prompts_changed,
                                                   resources_changed=given.resources_changed or said.resources_changed,
                                                   tools_changed=given.tools_changed or said.tools_changed)
        return super().get_capabilities(notification_options, experimental_capabilities or said.experimental,
                                        extensions, protocol_version=protocol_version)
