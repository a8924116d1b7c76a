"""The one small interface every engine implements."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mcp_sim.base import defaults


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass
class GenerationRequest:
    messages: list[ChatMessage]
    max_tokens: int
    # JSON Schema the answer must follow (already prepared for grammar use), or None for free text.
    json_schema: dict[str, Any] | None = None
    # Identity of `json_schema` so engines can cache compiled grammars per tool.
    schema_key: str | None = None
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    top_k: int = defaults.TOP_K
    repeat_penalty: float = defaults.REPEAT_PENALTY
    seed: int | None = None
    # Let the model reason first, up to think_budget tokens; the answer (and its grammar) comes after.
    think: bool = False
    think_budget: int = 0
    # Called from the generating thread with the number of tokens produced so far.
    on_token: Callable[[int], None] | None = None
    # Names the conversation this prompt continues (a session's history in one world). Engines that keep
    # model state between calls use it to resume from where that conversation left off.
    cache_key: str | None = None
    # Conversations whose saved state may be a prefix of this one (a forked world's origin).
    related_cache_keys: list[str] = field(default_factory=list)
    # Set by the caller to stop generation between tokens.
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    # "stop" when the model finished, "length" when max_tokens cut it off, "cancelled".
    finish_reason: str
    # Prompt tokens actually evaluated (less than prompt_tokens when a cached prefix was reused).
    evaluated_tokens: int | None = None
    # Prompt tokens a serving engine took from its prefix cache (usage.prompt_tokens_details.cached_tokens
    # of vLLM, SGLang and OpenAI); None when the engine does not say.
    cached_tokens: int | None = None
    # The model's reasoning when it thought first; never part of `text`, kept for the debug log.
    reasoning: str | None = None
    reasoning_tokens: int = 0
    # Completion tokens the grammar forced, fed in a batch without sampling (jump-forward decoding).
    forced_tokens: int = 0


@dataclass(frozen=True)
class EngineIdentity:
    """What answers, for the response cache's keys: a model file (hashed by content), else a description of
    a model served elsewhere (hashed as JSON); neither: the cache's record for the model's name decides."""

    model_file: Path | None = None
    described: dict[str, Any] = field(default_factory=dict)


class Engine(Protocol):
    """Generates text for a chat prompt. Implementations must be safe to call from worker threads."""

    name: str

    @property
    def capacity(self) -> int:
        """How many generate() calls it decodes at once; more wait inside generate(). A pool routes by it."""
        ...

    def load(self) -> None:
        """Make the engine ready now (load weights, reach the server), so a bad model fails at startup."""
        ...

    def close(self) -> None:
        """Free what the engine holds (model memory, connections)."""
        ...

    def generate(self, request: GenerationRequest) -> Generation: ...

    def count_tokens(self, messages: list[ChatMessage]) -> int: ...

    @property
    def context_size(self) -> int: ...

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        """None when the engine can constrain output to this schema, else why not."""
        ...

    def identity(self) -> EngineIdentity:
        """What answers, for the response cache's keys."""
        ...
