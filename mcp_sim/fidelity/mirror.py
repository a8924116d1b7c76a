"""Turn a live MCP server's tools/list into a spec file: schemas and annotations verbatim."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from mcp import StdioServerParameters

from mcp_sim.base.errors import McpSimError, SpecError
from mcp_sim.core.capabilities import capabilities_document
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.mirror_surface import MirroredSurface, fetch_surface
from mcp_sim.fidelity.upstream import connect, list_all_tools
from mcp_sim.sources.state_inference import infer_state, sql_dialect
from mcp_sim.state.repository_commands import effect as repository_effect
from mcp_sim.state.repository_commands import repository_commands


class MirrorError(McpSimError):
    """The server's tools would not make a spec that loads."""


@dataclass
class MirroredServer:
    name: str
    version: str | None
    instructions: str | None
    tools: list[dict[str, Any]]  # each an MCP Tool exactly as the server listed it (camelCase)
    # Its resources, resource templates and prompts (mcp_sim.fidelity.mirror_surface).
    surface: MirroredSurface = field(default_factory=MirroredSurface)
    # Its ServerCapabilities as it advertised them (camelCase), which `serve` then advertises.
    capabilities: dict[str, Any] = field(default_factory=dict)


async def fetch_server(target: StdioServerParameters | str, callbacks: dict[str, Any] | None = None
                       ) -> MirroredServer:
    """Connect, page through tools/list (and the resource and prompt lists), and keep everything a spec needs.
    CALLBACKS (Client keyword arguments) declare what the client offers: some servers list tools by it."""
    async with connect(target, **(callbacks or {})) as client:
        tools = await list_all_tools(client)
        info = client.server_info
        return MirroredServer(
            name=info.name if info else "unnamed-server",
            version=info.version if info else None,
            instructions=client.instructions,
            tools=[tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools],
            surface=await fetch_surface(client),
            capabilities=capabilities_document(client.server_capabilities))


def spec_document(server: MirroredServer) -> dict[str, Any]:
    """The spec: the server's identity and capabilities, its name and instructions as the world, its tools as
    listed, each with the state effect its name and schemas say (`x-sim.state`, mcp_sim.sources.state_inference)."""
    description = f"{server.name}: {server.instructions}" if server.instructions else server.name
    identity = {"name": server.name, **({"version": server.version} if server.version else {}),
                **({"capabilities": server.capabilities} if server.capabilities else {})}
    dialect = sql_dialect(server.name, server.instructions, *(str(tool.get("description")) for tool in server.tools))
    git = repository_commands(str(tool.get("name")) for tool in server.tools)
    tools = [with_state(tool, dialect) if tool.get("name") not in git else
             {**tool, "x-sim": {**tool.get("x-sim", {}), "state": repository_effect(git[tool["name"]])}}
             for tool in server.tools]
    return {"server": identity, "world": {"description": description}, "tools": tools,
            **server.surface.document_fields()}


def with_state(tool: dict[str, Any], dialect: str = "sqlite") -> dict[str, Any]:
    """The tool as listed, plus its inferred `x-sim.state` when its name and schemas say one (a SQL tool's
    with the server's DIALECT when it is not SQLite's)."""
    effect = infer_state(tool)
    if effect is None:
        return tool
    if effect["op"] == "sql" and dialect != "sqlite":
        effect["dialect"] = dialect
    return {**tool, "x-sim": {**tool.get("x-sim", {}), "state": effect}}


def state_lines(document: dict[str, Any]) -> list[str]:
    """One line per tool given an inferred state effect, for the person mirroring to check."""
    lines = []
    for tool in document["tools"]:
        effect = tool.get("x-sim", {}).get("state")
        if effect:
            details = ", ".join(f"{k} {json.dumps(v)}" for k, v in effect.items() if k not in ("op", "collection"))
            lines.append(f"  {tool['name']}: {effect['op']} {effect['collection']}{'; ' + details if details else ''}")
    return lines


def tool_problems(tool: dict[str, Any]) -> list[str]:
    """Why the spec loader would reject this tool (empty when it loads), checked on a scratch copy."""
    with tempfile.TemporaryDirectory(prefix="mcp-sim-mirror-") as scratch:
        path = Path(scratch) / "tool.json"
        path.write_text(json.dumps({"tools": [tool]}), encoding="utf-8")
        try:
            load_catalog([path])
        except SpecError as exc:
            where = f"{path}#/tools/0"
            named = f"{where} (tool {tool.get('name')!r})"
            return [p.replace(named, "").replace(where, "") for p in exc.problems]
    return []


def invalid_tools(document: dict[str, Any]) -> dict[str, list[str]]:
    """Tools of a mirrored document that would not load, by name, with the loader's reasons."""
    problems = {}
    for tool in document["tools"]:
        found = tool_problems(tool)
        if found:
            problems[str(tool.get("name"))] = found
    return problems


def dump_spec(document: dict[str, Any], path: Path | None) -> str:
    """The document as YAML (or JSON for a .json path)."""
    if path is not None and path.suffix == ".json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    # Wide lines keep long descriptions readable; block style keeps the schemas diffable.
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=120)
