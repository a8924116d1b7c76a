"""Getting an engine ready without blocking a server's startup: a quick check of the model up front, the
slow load and warm-up later. Engines that have nothing quicker than `load` (a remote server) just load."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from mcp_sim.engines.base import ChatMessage, Engine


@runtime_checkable
class Checkable(Protocol):
    def check(self) -> None:
        """Raise McpSimError when the model cannot be loaded, without loading it."""
        ...


@runtime_checkable
class Warmable(Protocol):
    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        """Load the model and evaluate these prompts' system messages ahead of the first call."""
        ...


def check_engine(engine: Engine) -> None:
    if isinstance(engine, Checkable):
        engine.check()
    else:
        engine.load()


def warm_engine(engine: Engine, prompts: list[list[ChatMessage]]) -> None:
    if isinstance(engine, Warmable):
        engine.warm(prompts)
    else:
        engine.load()
