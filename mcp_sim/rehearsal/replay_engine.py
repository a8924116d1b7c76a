"""The engine of a run that never asks the model (--replay-only, --strict): nothing is loaded or downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_sim.base.errors import EngineError
from mcp_sim.engines.base import ChatMessage, EngineIdentity, Generation, GenerationRequest


class ReplayOnlyEngine:
    """Stands in for the model a cache was recorded with; refuses to generate.

    `model_path` is the model file when it is on this machine (its content hash then picks the cache's
    answers), else None (the cache's record of which file answered under `model_name` does)."""

    def __init__(self, name: str, context_size: int, model_name: str, model_path: Path | None = None):
        self.name = name
        self.model_name = model_name
        self.model_path = model_path
        self._context_size = context_size

    @property
    def capacity(self) -> int:
        return 1  # it never generates: every call is refused at once

    @property
    def context_size(self) -> int:
        return self._context_size

    def identity(self) -> EngineIdentity:
        # The file when it is here; else nothing, and the cache's record for model_name decides.
        return EngineIdentity(model_file=self.model_path)

    def load(self) -> None:
        pass

    def close(self) -> None:
        pass

    def generate(self, request: GenerationRequest) -> Generation:
        raise EngineError(self._refusal())

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        raise EngineError(self._refusal())

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return None

    def _refusal(self) -> str:
        return (f"the model {self.model_name} is not loaded: --replay-only and --strict answer only from "
                "fixtures, cassettes and the cache; run without them to let the model answer")
