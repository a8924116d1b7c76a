"""Opening a model for the decoder: the model and one context of N sequences (N = `--slots`, 1 by default),
without the `Llama` wrapper (which makes a context of one sequence and a decode loop of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_sim.engines.base import GenerationRequest
from mcp_sim.engines.llama.batch import BATCH_TOKENS, BatchDecoder
from mcp_sim.engines.llama.batch_job import Codec, Job
from mcp_sim.engines.llama.gguf import open_model
from mcp_sim.engines.llama.overrides import OverrideValue, kv_override_array


def open_context(path: Path, n_ctx: int, slots: int, n_threads: int, gpu_layers: int, flash_attn: bool,
                 verbose: bool, overrides: dict[str, OverrideValue] | None = None,
                 extra_bufts: bool = True) -> tuple[Any, Any]:
    """(model, context): the context holds `slots` sequences, each in its own KV stream of n_ctx cells.
    `overrides`: llama.cpp metadata overrides (overrides.plan_load); `extra_bufts`: let llama.cpp repack the
    weights into its extra CPU buffer types (build.repack_choice says when not to)."""
    import llama_cpp
    from llama_cpp._internals import LlamaContext

    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = 0x7FFFFFFF if gpu_layers == -1 else gpu_layers  # INT32_MAX: every layer
    model_params.use_extra_bufts = extra_bufts
    kv_overrides = kv_override_array(overrides or {})  # kept alive here until the model is loaded
    if kv_overrides is not None:
        model_params.kv_overrides = kv_overrides
    model = open_model(path, model_params, verbose)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = n_ctx * slots
    params.n_batch = params.n_ubatch = BATCH_TOKENS
    params.n_seq_max = slots
    # One KV stream per sequence: each token's attention then spans its own sequence only. A unified cache
    # lets slots share a system prompt's cells, but every token attends over every sequence's cells
    # (masked), so 16 sessions of 8 calls ran at 1.66 calls/s unified against 2.10 separate
    # (benchmarks/bench_batching.py; docs/BENCHMARKS.md). Slots still start from the system prompt's snapshot.
    params.kv_unified = False
    params.n_threads = params.n_threads_batch = n_threads  # one count for prompt and generation
    params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                              else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    try:
        # Not under suppress_stdout_stderr either, for the reason open_model gives.
        context = LlamaContext(model=model, params=params, verbose=verbose)
    except ValueError:
        model.close()
        raise
    return model, context


def is_recurrent(model: Any) -> bool:
    """Recurrent and hybrid models (qwen35moe) cannot roll their state back to an earlier token."""
    import llama_cpp

    return bool(llama_cpp.llama_model_is_recurrent(model.model) or llama_cpp.llama_model_is_hybrid(model.model))


def warm_system_prompt(decoder: BatchDecoder, tokens: list[int], key: str, codec: Codec) -> None:
    """Read a system prompt (as a finished transcript) into a slot and snapshot it under KEY."""
    request = GenerationRequest(messages=[], max_tokens=0)
    decoder.run(Job(request, tokens, [], None, [(len(tokens), key)], codec, samples=False))
