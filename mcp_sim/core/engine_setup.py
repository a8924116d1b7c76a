"""From command-line settings and the model's manifest to a ready engine and simulation options.

Precedence for every tunable: the flag when given, else the model's manifest, else mcp-sim's default.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.core.simulator import SimOptions
from mcp_sim.engines.base import Engine
from mcp_sim.engines.registry import engine_kind
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.engines.worker import build_engine as build_in_process_or_worker
from mcp_sim.models.registry import Manifest

__all__ = ["EngineSettings", "Prepared", "build_engine", "check_room", "prepare", "sim_options"]

logger = logging.getLogger(__name__)


@dataclass
class Prepared:
    engine: Engine  # not loaded yet
    options: SimOptions
    manifest: Manifest | None


def prepare(settings: EngineSettings, download: bool = True) -> Prepared:
    """The engine (not loaded yet) and options for SETTINGS; downloads the model when allowed."""
    kind = engine_kind(settings.engine)
    choice = kind.choose(settings, download=download)
    options, ctx = sim_options(settings, choice.manifest)
    engine = build_in_process_or_worker(kind, settings, choice, ctx)
    logger.info("model %s; prompt style %s, thinking %s", choice.label, options.prompt_style,
                f"on, budget {options.think_budget}" if options.think else "off")
    return Prepared(engine, options, choice.manifest)


def build_engine(settings: EngineSettings, ctx: int) -> Engine:
    """An engine of CTX tokens for the model SETTINGS name, by any registered kind, without the simulation's
    options (an eval's judge)."""
    kind = engine_kind(settings.engine)
    return build_in_process_or_worker(kind, settings, kind.choose(settings, download=True), ctx)


def sim_options(settings: EngineSettings, manifest: Manifest | None) -> tuple[SimOptions, int]:
    """Simulation options and context size, flags first, then the manifest, then defaults."""
    sampling = manifest.sampling if manifest else None
    base = SimOptions()
    think = settings.think if settings.think is not None else bool(manifest and manifest.thinks)
    options = SimOptions(
        max_tokens=_first(settings.max_tokens, sampling and sampling.max_tokens, defaults.MAX_TOKENS),
        temperature=_first(settings.temperature, sampling and sampling.temperature, base.temperature),
        top_p=_first(settings.top_p, sampling and sampling.top_p, base.top_p),
        top_k=_first(settings.top_k, sampling and sampling.top_k, base.top_k),
        repeat_penalty=_first(sampling and sampling.repeat_penalty, base.repeat_penalty),
        seed=settings.seed, attempts=settings.attempts, max_argument_bytes=settings.max_argument_bytes,
        expose_prompt=settings.expose_prompt, simulate_errors=settings.simulate_errors,
        call_timeout=settings.call_timeout, history_tokens=settings.history_tokens,
        prompt_style=settings.prompt_style if settings.prompt_style != "auto" else (
            manifest.prompt_style if manifest else "generic"),
        think=think,
        think_budget=_first(settings.think_budget, sampling and sampling.think_budget, defaults.THINK_BUDGET))
    ctx = _first(settings.ctx, manifest and manifest.default_ctx, defaults.CTX)
    check_room(ctx, options)
    return options, ctx


def check_room(ctx: int, options: SimOptions) -> None:
    """Refuse at startup a context that every call would overflow."""
    budget = options.think_budget if options.think else 0
    if ctx < options.max_tokens + budget + defaults.MIN_PROMPT_ROOM:
        thinking = f" plus a {budget}-token thinking budget" if budget else ""
        raise McpSimError(f"a {ctx}-token context leaves no room for the prompt: answers take up to "
                          f"{options.max_tokens} tokens{thinking}. Raise --ctx, or lower --max-tokens"
                          f"{' or --think-budget (or pass --no-think)' if budget else ''}")


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None and v is not False)
