"""What an engine kind registers (mcp_sim/engines/registry.py): its name and options, how it picks its model
and builds its engine, and its `doctor` checks. The engine it builds reports its identity for cache keys
(Engine.identity).

Adding an engine: one module with the Engine class (mcp_sim/engines/base.py) and an EngineKind value, plus
its line in registry.py. Nothing else names engines: the CLI, `doctor`, the response cache and `check` all
ask the registry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mcp_sim.engines.base import Engine
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.registry import Manifest

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    """One line of `mcp-sim doctor`."""

    name: str
    status: str  # ok, warn or fail (fail blocks serving)
    detail: str


@dataclass(frozen=True)
class ModelChoice:
    """The model an engine kind picked for --model, before anything is loaded: its file when it is on this
    machine, and its manifest (which decides the simulation options)."""

    manifest: Manifest | None
    path: Path | None = None
    label: str = ""  # for the startup log: where the model came from


@dataclass(frozen=True)
class SettingsSummary:
    """The simulation options `doctor` reports, as text, and the context they were checked against."""

    ctx: int
    style: str  # prompt style and thinking
    sampling: str  # answer budget and sampling


# How `doctor` learns the options a manifest leads to; raises McpSimError when the context has no room.
SummaryFor = Callable[[Manifest | None], SettingsSummary]


class EngineKind(Protocol):
    """One kind of engine, as the registry knows it."""

    @property
    def name(self) -> str:
        """What --engine names it by."""
        ...

    @property
    def summary(self) -> str:
        """One line for --engine's help."""
        ...

    @property
    def in_process(self) -> bool:
        """Whether its engine runs the model in this process (then a native crash could take the server
        down, and --engine-process auto runs it in a worker: mcp_sim/engines/worker)."""
        ...

    @property
    def options(self) -> tuple[str, ...]:
        """The EngineSettings fields only this kind reads (their flags say so in --help)."""
        ...

    def choose(self, settings: EngineSettings, download: bool) -> ModelChoice:
        """The model SETTINGS name, downloading it when allowed; McpSimError when it cannot be had."""
        ...

    def offline_choice(self, settings: EngineSettings) -> ModelChoice:
        """The model as far as this machine knows it, never downloading or failing (a replay-only run)."""
        ...

    def build(self, settings: EngineSettings, choice: ModelChoice, ctx: int) -> Engine:
        """The engine, not loaded yet, with CTX tokens of context."""
        ...

    def checking_engine(self, ctx: int) -> Engine:
        """An engine for `mcp-sim check`: counts tokens and checks grammars with nothing loaded or fetched."""
        ...

    def doctor(self, settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
        """Every `doctor` check of this kind, in reading order."""
        ...
