"""Mirror a live server's resources, resource templates and prompts into spec entries.

Resources and templates are copied as listed (no content: their reads are then answered by the world
model). A prompt's messages are what prompts/get returns when every argument is its own `{{name}}`
placeholder, so the spec fills them as the real server would; a prompt whose server refuses placeholder
arguments gets one user message made of its description and arguments instead, and says so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from mcp_sim.core.resources import parse_surface
from mcp_sim.fidelity.upstream import MAX_PAGES, UpstreamError

Page = Callable[[str | None], Awaitable[Any]]


@dataclass
class MirroredSurface:
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    # What could not be copied as it is, one line each, for the person mirroring.
    notes: list[str] = field(default_factory=list)

    def document_fields(self) -> dict[str, Any]:
        """The spec's top-level resources, resourceTemplates and prompts (only those that are not empty)."""
        fields = {"resources": self.resources, "resourceTemplates": self.templates, "prompts": self.prompts}
        return {key: value for key, value in fields.items() if value}


async def fetch_surface(client: Client) -> MirroredSurface:
    """Everything the server lists besides tools, as spec entries that load; the rest left out with a note."""
    capabilities = client.server_capabilities
    surface = MirroredSurface()
    if capabilities.resources is not None:
        surface.resources = _dumped(await _optional(lambda c: client.list_resources(cursor=c), "resources",
                                                    surface.notes))
        surface.templates = _dumped(await _optional(lambda c: client.list_resource_templates(cursor=c),
                                                    "resource_templates", surface.notes))
    if capabilities.prompts is not None:
        for prompt in await _optional(lambda c: client.list_prompts(cursor=c), "prompts", surface.notes):
            surface.prompts.append(await _mirror_prompt(client, prompt, surface.notes))
    _drop_invalid(surface)
    return surface


async def _optional(page: Page, attribute: str, notes: list[str]) -> list[BaseModel]:
    """Every item of an optional list, or none (with a note) when the server refuses the list.

    Servers advertise a capability yet refuse one of its lists (mcp-server-sqlite and mcp-server-duckdb
    answer resources/templates/list with Method not found): the tools are what a mirror is for, so a
    refused list costs only its own entries.
    """
    try:
        return await _all(page, attribute)
    except MCPError as exc:
        method = _LIST_METHODS[attribute]
        notes.append(f"left out {attribute.replace('_', ' ')}: the server answered {method} with error "
                     f"{exc.code} ({exc.message})")
        return []


_LIST_METHODS = {"resources": "resources/list", "resource_templates": "resources/templates/list",
                 "prompts": "prompts/list"}


async def _all(page: Page, attribute: str) -> list[BaseModel]:
    items: list[BaseModel] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        result = await page(cursor)
        items.extend(getattr(result, attribute))
        cursor = result.next_cursor
        if cursor is None:
            return items
    raise UpstreamError(f"the {attribute} list still returned a nextCursor after {MAX_PAGES} pages; giving up")


def _dumped(items: list[BaseModel]) -> list[dict[str, Any]]:
    return [item.model_dump(by_alias=True, exclude_none=True, mode="json") for item in items]


async def _mirror_prompt(client: Client, prompt: Any, notes: list[str]) -> dict[str, Any]:
    entry = _dumped([prompt])[0]
    placeholders = {argument.name: "{{" + argument.name + "}}" for argument in prompt.arguments or []}
    try:
        result = await client.get_prompt(prompt.name, placeholders)
        entry["messages"] = _dumped(list(result.messages))
    except MCPError as exc:
        notes.append(f"prompt {prompt.name!r}: prompts/get refused placeholder arguments ({exc.message}); its "
                     "messages are made from its description")
        entry["messages"] = [{"role": "user", "content": {"type": "text", "text": _stand_in_text(prompt)}}]
    return entry


def _stand_in_text(prompt: types.Prompt) -> str:
    lines = [prompt.description or prompt.title or prompt.name]
    lines += [f"{argument.name}: {{{{{argument.name}}}}}" for argument in prompt.arguments or []]
    return "\n".join(lines)


def _drop_invalid(surface: MirroredSurface) -> None:
    """Leave out every entry the spec loader would reject, noting why."""
    for key, entries in (("resources", surface.resources), ("resourceTemplates", surface.templates),
                         ("prompts", surface.prompts)):
        kept = []
        for entry in entries:
            problems: list[str] = []
            parse_surface({key: [entry]}, "mirror", problems)
            if problems:
                reasons = "; ".join(p.replace(f"mirror#/{key}/0", "") for p in problems)
                surface.notes.append(f"left out {key} entry {entry.get('name')!r}:{reasons}")
            else:
                kept.append(entry)
        entries[:] = kept
