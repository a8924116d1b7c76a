"""A scripted engine for logic tests: a real Engine implementation whose answers are queued in advance."""

from __future__ import annotations

from collections import deque
from typing import Any

from mcp_sim.engines.base import ChatMessage, EngineIdentity, Generation, GenerationRequest


class ScriptedEngine:
    """Returns queued answers in order and records every request it was given."""

    name = "scripted"

    def __init__(self, *answers: str | tuple[str, str], context_size: int = 100_000):
        self._answers: deque[str | tuple[str, str]] = deque(answers)
        self.requests: list[GenerationRequest] = []
        self._context_size = context_size

    def identity(self) -> EngineIdentity:
        return EngineIdentity(described={"engine": type(self).__name__, "model": self.name})

    def load(self) -> None:
        pass

    def close(self) -> None:
        pass

    def enqueue(self, *answers: str | tuple[str, str]) -> None:
        self._answers.extend(answers)

    @property
    def context_size(self) -> int:
        return self._context_size

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        # One token per four characters is close enough for testing the trimming logic.
        return sum(len(m.content) for m in messages) // 4

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return None

    def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        answer = self._answers.popleft() if self._answers else ""
        text, finish = (answer, "stop") if isinstance(answer, str) else answer
        for index in range(len(text.split())):
            if request.on_token:
                request.on_token(index + 1)
        return Generation(text=text, prompt_tokens=self.count_tokens(request.messages),
                          completion_tokens=len(text.split()), finish_reason=finish)
