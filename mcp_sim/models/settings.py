"""From command-line settings and the model's manifest to a ready engine and simulation options.

Precedence for every tunable: the flag when given, else the model's manifest, else mcp-sim's default.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from mcp_sim import defaults
from mcp_sim.engines.base import Engine
from mcp_sim.errors import McpSimError
from mcp_sim.models.hub import resolve
from mcp_sim.models.registry import Manifest, find_manifest
from mcp_sim.simulator import SimOptions

logger = logging.getLogger(__name__)

@dataclass
class EngineSettings:
    """What the engine options of the CLI carry (None: decide from the manifest)."""

    model: str | None = None
    engine: str = "llama"
    ctx: int | None = None
    threads: int | None = None
    gpu_layers: int | None = None
    seed: int = defaults.SEED
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    attempts: int = defaults.ATTEMPTS
    max_argument_bytes: int = defaults.MAX_ARGUMENT_BYTES
    expose_prompt: bool = False
    simulate_errors: bool = False
    think: bool | None = None
    think_budget: int | None = None
    prompt_style: str = "auto"
    base_url: str | None = None
    api_key_env: str = defaults.OPENAI_API_KEY_ENV
    max_inflight: int = defaults.OPENAI_MAX_INFLIGHT
    timeout: float = defaults.OPENAI_TIMEOUT_S
    parallel: int = defaults.PARALLEL
    slots: int = defaults.SLOTS
    context_shift: bool = defaults.CONTEXT_SHIFT
    flash_attn: bool = defaults.FLASH_ATTN
    lazy_grammar: bool = defaults.LAZY_GRAMMAR
    state_cache_mb: int = defaults.STATE_CACHE_MB
    call_timeout: float = defaults.CALL_TIMEOUT_S


@dataclass
class Prepared:
    engine: Engine  # not loaded yet
    options: SimOptions
    manifest: Manifest | None


def prepare(settings: EngineSettings, download: bool = True) -> Prepared:
    """The engine (not loaded yet) and options for SETTINGS; downloads the model when allowed."""
    if settings.engine == "openai":
        return _prepare_openai(settings)
    from mcp_sim.engines.llama import LlamaEngine, default_threads
    from mcp_sim.engines.pool import EnginePool

    resolved = resolve(settings.model, download=download)
    manifest = resolved.manifest
    options, ctx = sim_options(settings, manifest)
    engines = [LlamaEngine(resolved.path, n_ctx=ctx, n_threads=settings.threads or default_threads(),
                           n_gpu_layers=settings.gpu_layers, seed=settings.seed,
                           state_cache_mb=settings.state_cache_mb, slots=settings.slots,
                           context_shift=settings.context_shift, flash_attn=settings.flash_attn,
                           lazy_grammar=settings.lazy_grammar,
                           metadata_overrides=manifest.metadata_overrides if manifest else None)
               for _ in range(settings.parallel)]
    engine: Engine = engines[0] if settings.parallel == 1 else EnginePool(engines)
    logger.info("model %s (%s) from %s; prompt style %s, thinking %s", resolved.path.name,
                manifest.name if manifest else "not in the registry", resolved.source, options.prompt_style,
                f"on, budget {options.think_budget}" if options.think else "off")
    return Prepared(engine, options, manifest)


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
        call_timeout=settings.call_timeout,
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


def _prepare_openai(settings: EngineSettings) -> Prepared:
    from mcp_sim.engines.openai import OpenAIEngine

    if not settings.base_url:
        raise McpSimError("--engine openai needs --base-url, e.g. --base-url http://gpu-box:8000/v1")
    if not settings.model:
        raise McpSimError("--engine openai needs --model: the model name the server serves "
                          "(see GET /v1/models)")
    manifest = find_manifest(settings.model)
    options, ctx = sim_options(settings, manifest)
    api_key = os.environ.get(settings.api_key_env) if settings.api_key_env else None
    engine = OpenAIEngine(settings.base_url, settings.model, api_key=api_key, n_ctx=ctx,
                          timeout=settings.timeout, max_inflight=settings.max_inflight)
    return Prepared(engine, options, manifest)


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None and v is not False)
