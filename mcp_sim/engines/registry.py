"""Every engine kind, by the name --engine takes. Adding one: its module, and a line here."""

from __future__ import annotations

from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.kind import EngineKind
from mcp_sim.engines.llama.kind import LLAMA
from mcp_sim.engines.openai_kind import OPENAI

ENGINES: dict[str, EngineKind] = {kind.name: kind for kind in (LLAMA, OPENAI)}


def engine_names() -> list[str]:
    return list(ENGINES)


def engine_kind(name: str) -> EngineKind:
    try:
        return ENGINES[name]
    except KeyError:
        raise McpSimError(f"unknown engine {name!r}: use one of {', '.join(ENGINES)}") from None
