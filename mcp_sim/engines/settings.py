"""What the engine options of the CLI carry, as one typed value below the engines that read it."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_sim.base import defaults


@dataclass
class EngineSettings:
    """What the engine options of the CLI carry (None: decide from the manifest). Each engine kind reads the
    fields it lists in its `options` (mcp_sim/engines/kind.py); the sampling and answer fields are everyone's."""

    model: str | None = None
    engine: str = defaults.ENGINE
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
    jump_forward: bool = defaults.JUMP_FORWARD
    cpu_repack: str = defaults.CPU_REPACK
    engine_process: str = defaults.ENGINE_PROCESS
    state_cache_mb: int = defaults.STATE_CACHE_MB
    prompt_cache_mb: int = defaults.PROMPT_CACHE_MB
    prompt_cache_dir: str | None = None  # None: prompt_store.default_folder()
    call_timeout: float = defaults.CALL_TIMEOUT_S
    history_tokens: int = defaults.HISTORY_TOKENS
