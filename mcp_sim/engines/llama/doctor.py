"""`mcp-sim doctor` for the llama engine: the llama.cpp build, the model file, its overrides, the context
against what the model was trained for, and whether what llama.cpp allocates for them fits in memory."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_sim.base import defaults
from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.exits import describe_exit
from mcp_sim.engines.kind import FAIL, OK, WARN, Check, SummaryFor
from mcp_sim.engines.llama.batch import BATCH_TOKENS
from mcp_sim.engines.llama.build import build_info, cpu_repack, gpu_offload_supported
from mcp_sim.engines.llama.gguf import read_header, read_metadata
from mcp_sim.engines.llama.overrides import plan_load
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.engines.subprocesses import child_environment, module_command
from mcp_sim.models.hub import resolve

# Backends as llama.cpp's system info names them, in the order to report them.
_BACKENDS = (("CUDA", "CUDA"), ("METAL", "Metal"), ("HIP", "ROCm"), ("VULKAN", "Vulkan"), ("SYCL", "SYCL"))
_GIB = 1024**3
_MIB = 1024**2

# What llama.cpp allocates besides the weights, the KV cache and the recurrent state, read from the source
# vendored in llama-cpp-python 0.3.36 (src/llama-context.cpp sched_reserve, src/llama-graph.cpp, ggml-cpu)
# and checked against the RSS of the twin model (tests/test_twin_memory.py, docs/MODELS.md "memory at scale").
#
# Without flash attention every attention layer materializes the scores of a batch, f32 [context of one
# sequence, batch tokens, query heads], softmaxed in place; the CPU backend multiplies V with an f16 copy of
# them (its work buffer); the mask is f32 [context, batch tokens]. One layer's worth at a time: the graph's
# allocator reuses the memory for the next layer. The batch is mcp-sim's ubatch (BATCH_TOKENS).
SCORE_BYTES = 4
SCORE_COPY_BYTES = 2
MASK_BYTES = 4
# Flash attention never materializes the scores; what remains that grows with the context is its f16 mask.
FLASH_MASK_BYTES = 2
# Logits are f32, a row for each token whose logits are asked for. mcp-sim asks for one a sequence (its last
# token in a batch; batch.py), so on the CPU, where a page costs RAM once written, that is one row a slot. A
# GPU backend allocates in full the compute buffer llama.cpp reserves for the worst batch, which asks for the
# logits of every token: BATCH_TOKENS rows (485 MiB for a 248,320-token vocabulary). Not measured: no GPU here.
LOGIT_BYTES = 4
# Recurrent layers keep f32 state (llama_memory_recurrent).
STATE_BYTES = 4
# llama.cpp's bookkeeping of each KV cell, besides its keys and values (src/llama-kv-cells.h): position,
# shift, M-RoPE position and a 256-sequence bitset (48 bytes) for every cell, and two tree nodes (the used
# cells, the sequence's positions; 48 bytes each from malloc) for every cell in use. Small beside a real
# model's KV (20 KiB a token for qwen35moe), more than half of the twin's (256 bytes).
KV_CELL_BYTES = 48 + 2 * 48
# What a loaded model and context cost whatever their sizes, measured as the RSS growth of a process that
# loads the twin and reads a prompt, less the terms above (docs/MODELS.md): ggml's backend and thread pools,
# the decoder thread, the graph's small activations, the chat template and the tokenized prompt.
RUNTIME_OVERHEAD = 32 * _MIB


def llama_checks(settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
    """The build first; the model's checks only when the build can load models at all."""
    build = _llama_build()
    if build.status == FAIL:
        return [build]
    return [build, _repack_check(settings), *_model_checks(settings, summary_for)]


def _repack_check(settings: EngineSettings) -> Check:
    choice = cpu_repack(settings.cpu_repack)
    return Check("cpu repack", WARN if choice.use_extra_bufts and choice.amx else OK, choice.reason)


def _llama_build() -> Check:
    try:
        info = build_info()
    except ImportError as exc:
        return Check("llama.cpp", FAIL, f"llama-cpp-python is not importable ({exc}): pip install "
                                         "llama-cpp-python (see docs/MODELS.md for CUDA and Metal builds)")
    backend = backend_name(info["system_info"], info["gpu_offload"])
    offload = ("supported, all layers offloaded by default" if info["gpu_offload"]
               else "not supported by this build")
    return Check("llama.cpp", OK, f"llama-cpp-python {info['llama_cpp_python']}, backend {backend}, "
                                  f"GPU offload {offload}")


def _gpu_offload() -> bool:
    return gpu_offload_supported()


def backend_name(system_info: str, gpu_offload: bool) -> str:
    """CUDA, Metal, ROCm, Vulkan, SYCL or CPU, from llama.cpp's system info."""
    upper = system_info.upper()
    for marker, name in _BACKENDS:
        if re.search(rf"\b{marker}\b", upper):
            return name
    return "GPU (unknown kind)" if gpu_offload else "CPU"


def _model_checks(settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
    try:
        resolved = resolve(settings.model, download=False)
    except McpSimError as exc:
        return [Check("model", FAIL, str(exc))]
    label = resolved.manifest.name if resolved.manifest else "not in the registry"
    quant = f":{resolved.quant}" if resolved.quant else ""
    weights = model_bytes(resolved.path)
    checks = [Check("model", OK, f"{resolved.path.name} ({label}{quant}), {weights / 1e9:.2f} GB, "
                                 f"{resolved.source}: {resolved.path}")]
    try:
        metadata = read_metadata(resolved.path)
    except McpSimError as exc:
        return [*checks, Check("architecture", FAIL, str(exc))]
    architecture = metadata.get("general.architecture", "unknown")
    checks.append(Check("architecture", OK, f"{architecture}: this llama.cpp build loads it"))
    overrides = _load_plan(resolved.path, resolved.manifest.metadata_overrides if resolved.manifest else None)
    checks.append(overrides[0])
    if overrides[0].status == FAIL:
        return checks
    # What llama.cpp will see: the file's metadata with the overrides applied (e.g. the real layer count).
    metadata = {**metadata, **{key: str(value) for key, value in overrides[1].items()}}
    try:
        summary = summary_for(resolved.manifest)
    except McpSimError as exc:
        return [*checks, Check("context", FAIL, str(exc))]
    ctx = summary.ctx
    trained = _int(metadata.get(f"{architecture}.context_length"))
    if trained and ctx > trained:
        checks.append(Check("context", WARN, f"--ctx {ctx} is more than the {trained} tokens the model was "
                                             "trained for; expect worse answers past that"))
    else:
        trained_note = f" (trained for {trained})" if trained else ""
        checks.append(Check("context", OK, f"{ctx} tokens{trained_note}"))
    checks.append(Check("settings", OK, f"{summary.style}, {summary.sampling}"))
    memory = _memory_check(model_memory(resolved.path, metadata), ctx, settings, _gpu_offload())
    checks.append(memory)
    if memory.status == OK:  # a model that may not fit in memory is not loaded just to probe it
        checks.append(_decode_probe(resolved.path, settings))
    return checks


def _decode_probe(path: Path, settings: EngineSettings) -> Check:
    """A short decode in a child process: a native crash there is reported, with what to try, instead of
    being met on the first call."""
    command = module_command("mcp_sim.engines.llama.probe", str(path), settings.cpu_repack)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=defaults.DOCTOR_PROBE_TIMEOUT_S,
                              env=child_environment())
    except subprocess.TimeoutExpired:
        return Check("decode probe", WARN,
                     f"a short decode in a child process took more than {defaults.DOCTOR_PROBE_TIMEOUT_S} s")
    if done.returncode == 0:
        return Check("decode probe", OK, f"a child process loaded the model and decoded: {done.stdout.strip()}")
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return Check("decode probe", FAIL, f"a short decode in a child process died: {describe_exit(done.returncode)}"
                 + (f"; its last words: {last}" if last else ""))


def _load_plan(path: Path, manifest_overrides: dict[str, Any] | None) -> tuple[Check, dict[str, Any]]:
    """The metadata overrides the model loads with, and why (a defect found in the file, the manifest)."""
    try:
        plan = plan_load(path, manifest_overrides)
    except McpSimError as exc:
        return Check("overrides", FAIL, str(exc)), {}
    if not plan.findings:
        return Check("overrides", OK, "none needed: the file's metadata matches its tensors"), {}
    return Check("overrides", OK, "; ".join(plan.findings)), plan.overrides


def _memory_check(model: ModelMemory | None, ctx: int, settings: EngineSettings, gpu: bool) -> Check:
    total = physical_memory()
    if model is None:
        return Check("memory", WARN, "the memory needed could not be estimated: this model's metadata lacks "
                                     "the attention shapes that size its KV cache")
    needed, detail = memory_estimate(model, ctx, instances=settings.parallel, slots=settings.slots,
                                     state_cache=settings.state_cache_mb * _MIB, gpu=gpu,
                                     flash_attn=settings.flash_attn)
    if total is None:
        return Check("memory", OK, detail)
    detail += f"; this machine has {total / _GIB:.1f} GiB of RAM"
    if needed > total:
        return Check("memory", WARN, detail + ": it will not fit in RAM; offload to a GPU with enough "
                                              "memory, use a smaller quant, or lower --ctx")
    return Check("memory", OK, detail)


@dataclass(frozen=True)
class ModelMemory:
    """What the memory estimate reads from a model file, in bytes and counts."""

    weights: int  # the GGUF's size, all parts
    kv_per_token: int  # f16 K and V of every attention layer for one token
    recurrent_state: int  # what one sequence keeps in the recurrent layers (0 without any)
    query_heads: int
    vocabulary: int


def model_memory(path: Path, metadata: dict[str, str]) -> ModelMemory | None:
    """The model's shapes from its metadata (overrides applied) and file; None when the metadata lacks the
    attention shapes."""
    kv_per_token = kv_cache_bytes(metadata, 1)
    if kv_per_token is None:
        return None
    arch = metadata.get("general.architecture", "")
    vocabulary = _int(metadata.get(f"{arch}.vocab_size")) or \
        read_header(path).array_lengths.get("tokenizer.ggml.tokens", 0)
    return ModelMemory(weights=model_bytes(path), kv_per_token=kv_per_token,
                       recurrent_state=recurrent_state_bytes(metadata),
                       query_heads=_int(metadata.get(f"{arch}.attention.head_count")) or 0, vocabulary=vocabulary)


def memory_estimate(model: ModelMemory, ctx: int, *, instances: int, slots: int, state_cache: int, gpu: bool,
                    flash_attn: bool) -> tuple[int, str]:
    """Bytes needed and the sum spelled out. Weights: one copy per instance on a GPU; on the CPU the instances
    share the file's mapped pages. Per sequence (instances x slots): the KV cache at the context and the
    recurrent state. Per instance: the compute buffers (attention_bytes, logits), llama.cpp's runtime and the
    saved-state budget."""
    copies = instances if gpu else 1
    contexts = instances * slots
    kv = (model.kv_per_token + KV_CELL_BYTES) * ctx
    attention = attention_bytes(ctx, model.query_heads, flash_attn)
    logit_rows = BATCH_TOKENS if gpu else slots
    logits = model.vocabulary * LOGIT_BYTES * logit_rows
    per_instance = attention + logits + RUNTIME_OVERHEAD + state_cache
    needed = copies * model.weights + contexts * (kv + model.recurrent_state) + instances * per_instance
    per = "per slot" if slots > 1 else "per instance"
    recurrent = (f" + {contexts} x recurrent state {_gib(model.recurrent_state)} ({per})"
                 if model.recurrent_state else "")
    kind = "flash attention: its f16 mask" if flash_attn else \
        f"no flash attention: f32 scores, their f16 copy and the mask, {model.query_heads} query heads"
    rows = f"{BATCH_TOKENS} rows, a whole batch as reserved on a GPU" if gpu else \
        f"{slots} row{'s' if slots > 1 else ''}, one a slot"
    return needed, (f"~{_gib(needed)} estimated = {copies} x weights {_gib(model.weights)} + "
                    f"{contexts} x KV cache {_gib(kv)} for the context (f16 and {KV_CELL_BYTES} bytes of "
                    f"bookkeeping a cell, {per}){recurrent} + "
                    f"{instances} x attention buffers {_gib(attention)} (a {BATCH_TOKENS}-token batch over "
                    f"{ctx} tokens, {kind}) + {instances} x logits {_gib(logits)} ({model.vocabulary}-token "
                    f"vocabulary x {rows}) + {instances} x llama.cpp runtime {_gib(RUNTIME_OVERHEAD)} + "
                    f"{instances} x state cache up to {_gib(state_cache)} (--state-cache-mb)")


def attention_bytes(ctx: int, query_heads: int, flash_attn: bool) -> int:
    """What attention over CTX tokens (one sequence's KV stream) allocates for one batch of BATCH_TOKENS."""
    if flash_attn:
        return ctx * BATCH_TOKENS * FLASH_MASK_BYTES
    return ctx * BATCH_TOKENS * (query_heads * (SCORE_BYTES + SCORE_COPY_BYTES) + MASK_BYTES)


def recurrent_state_bytes(metadata: dict[str, str]) -> int:
    """What one sequence keeps in the recurrent layers (Mamba-style SSM, Gated DeltaNet), as llama.cpp sizes it
    (llama_hparams n_embd_r, n_embd_s): a convolution window of (kernel - 1) x (inner + 2 x groups x state)
    and a state of state x inner per layer; 0 for a model without recurrent layers."""
    arch = metadata.get("general.architecture", "")
    state = _int(metadata.get(f"{arch}.ssm.state_size"))
    inner = _int(metadata.get(f"{arch}.ssm.inner_size"))
    layers = _int(metadata.get(f"{arch}.block_count"))
    if not (state and inner and layers):
        return 0
    kernel = _int(metadata.get(f"{arch}.ssm.conv_kernel")) or 0
    groups = _int(metadata.get(f"{arch}.ssm.group_count")) or 0
    # Hybrid models (qwen35moe) have one full-attention layer in every `full_attention_interval`; the rest
    # are recurrent. Without the key, every layer is (Mamba).
    interval = _int(metadata.get(f"{arch}.full_attention_interval"))
    recurrent_layers = layers - layers // interval if interval else layers
    window = max(kernel - 1, 0) * (inner + 2 * groups * state)
    return recurrent_layers * (window + state * inner) * STATE_BYTES


def kv_cache_bytes(metadata: dict[str, str], ctx: int) -> int | None:
    """f16 K and V for every attention layer at CTX tokens; None when the metadata lacks the shapes."""
    arch = metadata.get("general.architecture", "")
    layers = _int(metadata.get(f"{arch}.block_count"))
    heads = _int(metadata.get(f"{arch}.attention.head_count"))
    kv_heads = _int(metadata.get(f"{arch}.attention.head_count_kv")) or heads
    embedding = _int(metadata.get(f"{arch}.embedding_length"))
    if not (layers and kv_heads and ((heads and embedding) or metadata.get(f"{arch}.attention.key_length"))):
        return None
    head_dim = embedding // heads if heads and embedding else 0
    key_length = _int(metadata.get(f"{arch}.attention.key_length")) or head_dim
    value_length = _int(metadata.get(f"{arch}.attention.value_length")) or key_length
    # Hybrid models (qwen35moe) keep a KV cache only in every Nth, full-attention layer.
    interval = _int(metadata.get(f"{arch}.full_attention_interval"))
    attention_layers = layers // interval if interval else layers
    return attention_layers * ctx * kv_heads * (key_length + value_length) * 2


def model_bytes(path: Path) -> int:
    """The size of a GGUF, counting every part of a split model."""
    match = re.search(r"-00001-of-(\d{5})\.gguf$", path.name)
    if match is None:
        return path.stat().st_size
    head = path.name[: match.start()]
    total = int(match.group(1))
    parts = [path.with_name(f"{head}-{i:05d}-of-{total:05d}.gguf") for i in range(1, total + 1)]
    return sum(p.stat().st_size for p in parts if p.exists())


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _gib(size: int) -> str:
    """GiB, or MiB below a tenth of one (a tiny model's terms)."""
    return f"{size / _GIB:.2f} GiB" if size >= _GIB // 10 else f"{size / _MIB:.1f} MiB"


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None

