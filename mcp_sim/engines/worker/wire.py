"""What crosses between the server and its model process: the recipe an engine is built from, and a
generation request without what cannot cross (its callback and its cancel event travel as messages)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mcp_sim.engines.base import GenerationRequest
from mcp_sim.engines.kind import ModelChoice
from mcp_sim.engines.settings import EngineSettings

# Fields of a request that stay in the server: on_token becomes "token" messages, cancel a "cancel" one.
_LOCAL_FIELDS = {"on_token", "cancel"}


@dataclass(frozen=True)
class Recipe:
    """How the model process builds its engine: one engine of KIND (its parallel is always 1)."""

    kind: str
    settings: EngineSettings
    choice: ModelChoice
    ctx: int
    log_level: int


def request_payload(request: GenerationRequest) -> dict[str, Any]:
    return {field.name: getattr(request, field.name) for field in dataclasses.fields(request)
            if field.name not in _LOCAL_FIELDS}
