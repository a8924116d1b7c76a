"""Tokens of a text for any engine: exact where the engine has its tokenizer at hand (a llama.cpp model's
vocabulary, read without its weights), else an estimate from the length."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.base import Engine

# Characters per token when nothing better is known: JSON schemas run near 3 with SmolLM2's tokenizer.
CHARS_PER_TOKEN_ESTIMATE = 3.0


@runtime_checkable
class TextCounting(Protocol):
    def count_text_tokens(self, text: str) -> int:
        """Tokens of TEXT alone, with no chat template around it."""
        ...


def count_text(engine: Engine, text: str) -> tuple[int, bool]:
    """The tokens of TEXT and whether that is exact (False: estimated from its length)."""
    if isinstance(engine, TextCounting):
        try:
            return engine.count_text_tokens(text), True
        except McpSimError:
            pass  # no tokenizer at hand (no model file): estimate
    return estimate(text), False


def estimate(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN_ESTIMATE) + 1
