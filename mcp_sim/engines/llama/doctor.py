"""`mcp-sim doctor` for the llama engine: the llama.cpp build, the model file, its overrides, the context
against what the model was trained for, and whether weights and KV cache fit in memory."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import McpSimError
from mcp_sim.engines.kind import FAIL, OK, WARN, Check, SummaryFor
from mcp_sim.engines.llama.build import build_info, gpu_offload_supported
from mcp_sim.engines.llama.gguf import read_metadata
from mcp_sim.engines.llama.overrides import plan_load
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.models.hub import resolve

# Backends as llama.cpp's system info names them, in the order to report them.
_BACKENDS = (("CUDA", "CUDA"), ("METAL", "Metal"), ("HIP", "ROCm"), ("VULKAN", "Vulkan"), ("SYCL", "SYCL"))
_GIB = 1024**3


def llama_checks(settings: EngineSettings, summary_for: SummaryFor) -> list[Check]:
    """The build first; the model's checks only when the build can load models at all."""
    build = _llama_build()
    if build.status == FAIL:
        return [build]
    return [build, *_model_checks(settings, summary_for)]


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
    checks.append(_memory_check(weights, kv_cache_bytes(metadata, ctx), settings, _gpu_offload()))
    return checks


def _load_plan(path: Path, manifest_overrides: dict[str, Any] | None) -> tuple[Check, dict[str, Any]]:
    """The metadata overrides the model loads with, and why (a defect found in the file, the manifest)."""
    try:
        plan = plan_load(path, manifest_overrides)
    except McpSimError as exc:
        return Check("overrides", FAIL, str(exc)), {}
    if not plan.findings:
        return Check("overrides", OK, "none needed: the file's metadata matches its tensors"), {}
    return Check("overrides", OK, "; ".join(plan.findings)), plan.overrides


def _memory_check(weights: int, kv: int | None, settings: EngineSettings, gpu: bool) -> Check:
    total = physical_memory()
    if kv is None:
        return Check("memory", WARN, f"weights {weights / _GIB:.1f} GiB; the KV cache size could not be "
                                     "estimated from this model's metadata")
    needed, detail = memory_estimate(weights, kv, settings.parallel, settings.state_cache_mb * 1024**2, gpu,
                                     slots=settings.slots)
    if total is None:
        return Check("memory", OK, detail)
    detail += f"; this machine has {total / _GIB:.1f} GiB of RAM"
    if needed > total:
        return Check("memory", WARN, detail + ": it will not fit in RAM; offload to a GPU with enough "
                                              "memory, use a smaller quant, or lower --ctx")
    return Check("memory", OK, detail)


def memory_estimate(weights: int, kv: int, instances: int, state_cache: int, gpu: bool,
                    slots: int = 1) -> tuple[int, str]:
    """Bytes needed and the sum spelled out: weights (one copy per instance on a GPU; on the CPU the
    instances share the file's mapped pages) + instances x slots x KV at the context + the saved-state
    budget, + ~10%."""
    copies = instances if gpu else 1
    contexts = instances * slots
    # Compute buffers and runtime overhead: a rough tenth on top of weights and KV.
    needed = int((copies * weights + contexts * kv) * 1.1) + instances * state_cache
    per = "per slot" if slots > 1 else "per instance"
    return needed, (f"~{needed / _GIB:.1f} GiB estimated = {copies} x weights {weights / _GIB:.1f} GiB + "
                    f"{contexts} x KV cache {kv / _GIB:.2f} GiB for the context (f16, {per}), + ~10% "
                    f"compute buffers, + {instances} x state cache up to {state_cache / _GIB:.1f} GiB "
                    "(--state-cache-mb)")


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



def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None

