"""What a simulated server advertises in `initialize`: the capabilities its specs declare, or every one.

A spec may say what the server it stands for has, as a real server says it in its InitializeResult
(`mcp-sim mirror` copies it from the live server):

    server:
      name: example
      capabilities: {tools: {listChanged: true}, logging: {}, resources: {subscribe: true}, experimental: {...}}

A spec file that declares none stands for a server with every feature (logging, completions, resources with
subscribe, prompts), so any client can be rehearsed against it. The server advertises the union over its spec
files, answers the methods of a capability it does not advertise with -32601 Method not found as a real
server lacking it does, and (with `serve --reload`) advertises `listChanged` on tools, resources and prompts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The ServerCapabilities fields a spec may declare; each a mapping ({} turns the feature on).
DECLARABLE = ("tools", "resources", "prompts", "logging", "completions", "experimental")
_FLAGS = {"tools": ("listChanged",), "resources": ("subscribe", "listChanged"), "prompts": ("listChanged",)}

# The low-level Server's handler keywords, by the capability they serve.
_HANDLERS = {
    "logging": ("on_set_logging_level",),
    "completions": ("on_completion",),
    "subscribe": ("on_subscribe_resource", "on_unsubscribe_resource"),
    "resources": ("on_list_resources", "on_list_resource_templates", "on_read_resource"),
    "prompts": ("on_list_prompts", "on_get_prompt"),
}


def check_capabilities(raw: Any, where: str, problems: list[str]) -> dict[str, Any] | None:
    """`server.capabilities` of a spec file, checked; None when it declares none."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problems.append(f"{where}: must be a mapping like {{tools: {{}}, logging: {{}}}} (ServerCapabilities)")
        return None
    checked: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in DECLARABLE:
            continue  # a newer capability (extensions, tasks, ...): kept in the file, not advertised
        if not isinstance(value, dict):
            problems.append(f"{where}/{key}: must be a mapping ({{}} to turn it on)")
            continue
        for flag in _FLAGS.get(key, ()):
            if flag in value and not isinstance(value[flag], bool):
                problems.append(f"{where}/{key}/{flag}: must be true or false")
        checked[key] = value
    return checked


@dataclass(frozen=True)
class Advertised:
    """The capabilities one server advertises."""

    logging: bool = True
    completions: bool = True
    resources: bool = True
    subscribe: bool = True
    prompts: bool = True
    tools_changed: bool = False
    resources_changed: bool = False
    prompts_changed: bool = False
    experimental: dict[str, dict[str, Any]] | None = field(default=None, hash=False)

    def has(self, feature: str) -> bool:
        return bool(getattr(self, feature))

    def keep(self, handlers: Mapping[str, Any], *, world_resource: bool = False) -> dict[str, Any]:
        """The handlers of the features advertised (the others answer Method not found). `world_resource`
        keeps the resource handlers for `sim://world` whatever the specs say."""
        dropped = {name for feature, names in _HANDLERS.items()
                   if not self.has(feature) and not (world_resource and feature == "resources")
                   for name in names}
        return {name: handler for name, handler in handlers.items() if name not in dropped}


@dataclass(frozen=True)
class FileFeatures:
    """What one spec file says of its server: its declared capabilities (None: every feature) and what it
    lists besides tools (a file with resources has the resources capability whatever it declares)."""

    declared: dict[str, Any] | None
    has_resources: bool = False
    has_prompts: bool = False


def advertised(files: Iterable[FileFeatures], list_changed: bool = False) -> Advertised:
    """The union of what the spec files declare; `list_changed` (serve --reload) adds listChanged."""
    files = list(files)
    if not files or any(f.declared is None for f in files):
        return Advertised(tools_changed=list_changed, resources_changed=list_changed, prompts_changed=list_changed)

    def declared(key: str) -> list[dict[str, Any]]:
        return [f.declared[key] for f in files if f.declared is not None and isinstance(f.declared.get(key), dict)]

    def flag(key: str, name: str) -> bool:
        return any(entry.get(name) is True for entry in declared(key))

    experimental: dict[str, dict[str, Any]] = {}
    for entry in declared("experimental"):
        experimental.update({str(k): v if isinstance(v, dict) else {} for k, v in entry.items()})
    resources = bool(declared("resources")) or any(f.has_resources for f in files)
    prompts = bool(declared("prompts")) or any(f.has_prompts for f in files)
    return Advertised(
        logging=bool(declared("logging")), completions=bool(declared("completions")),
        resources=resources, subscribe=flag("resources", "subscribe"), prompts=prompts,
        tools_changed=list_changed or flag("tools", "listChanged"),
        resources_changed=resources and (list_changed or flag("resources", "listChanged")),
        prompts_changed=prompts and (list_changed or flag("prompts", "listChanged")),
        experimental=experimental or None)


def capabilities_document(capabilities: Any) -> dict[str, Any]:
    """A live server's ServerCapabilities as a spec's `server.capabilities`: camelCase, unset fields left out,
    everything else kept (what `serve` does not advertise, such as tasks, still records the real server)."""
    if capabilities is None:
        return {}
    dumped: dict[str, Any] = json.loads(capabilities.model_dump_json(by_alias=True, exclude_none=True))
    return dumped
