"""Metadata overrides for llama.cpp: the ones a model's manifest asks for, and the ones a defect in the file
itself calls for, found by reading its header.

The defect known today is the published Qwen-AgentWorld-35B-A3B GGUF's: its converter counted the
multi-token-prediction layer in `block_count` (41) but shipped only the 40 real layers, so llama.cpp stops
with "missing tensor 'blk.40.attn_norm.weight'". The file's own tensor list shows it, and overriding
`<arch>.block_count` with the layers it holds makes it load.
"""

from __future__ import annotations

import ctypes
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_sim.base.errors import ModelFileError
from mcp_sim.engines.llama.gguf import GgufHeader, read_header

logger = logging.getLogger(__name__)

OverrideValue = bool | int | float | str
_LAYER = re.compile(r"^blk\.(\d+)\.")
# llama.cpp's llama_model_kv_override holds strings of at most 127 bytes and a terminating zero.
_MAX_STRING = 127


@dataclass(frozen=True)
class LoadPlan:
    """What a model is loaded with: every override, and why each one is there (one line per finding)."""

    overrides: dict[str, OverrideValue] = field(default_factory=dict)
    findings: tuple[str, ...] = ()


def layer_count_fix(header: GgufHeader) -> tuple[dict[str, OverrideValue], str] | None:
    """Overrides that make a file whose `block_count` counts layers it does not hold load, and the finding
    in words; None when the count matches the `blk.N.*` tensors (or the file has no layer tensors)."""
    arch = header.architecture
    declared = header.metadata.get(f"{arch}.block_count")
    layers = {int(match.group(1)) for name in header.tensors if (match := _LAYER.match(name))}
    if not isinstance(declared, int) or isinstance(declared, bool) or not layers:
        return None
    present = max(layers) + 1
    if present >= declared:
        return None
    finding = (f"{arch}.block_count is {declared} but the file holds layers 0-{present - 1} only (no "
               f"blk.{present}.* tensors: a converter counted a layer it did not write)")
    # Per-layer arrays sized for the declared count would no longer match: an override cannot fix those.
    sized = sorted(key for key, length in header.array_lengths.items()
                   if key.startswith(f"{arch}.") and length == declared)
    if sized:
        raise ModelFileError(f"{finding}; its per-layer metadata ({', '.join(sized)}) also counts {declared} "
                             "layers, which no override can shorten: download a fixed file")
    overrides: dict[str, OverrideValue] = {f"{arch}.block_count": present}
    # A multi-token-prediction layer counted in nextn_predict_layers is among the missing ones.
    nextn = header.metadata.get(f"{arch}.nextn_predict_layers")
    if isinstance(nextn, int) and not isinstance(nextn, bool) and nextn > 0:
        overrides[f"{arch}.nextn_predict_layers"] = 0
    return overrides, finding


def plan_load(path: Path, manifest_overrides: dict[str, OverrideValue] | None = None) -> LoadPlan:
    """The overrides to load `path` with: what its header calls for, then the manifest's (which win)."""
    overrides: dict[str, OverrideValue] = {}
    findings: list[str] = []
    fix = layer_count_fix(read_header(path))
    if fix is not None:
        overrides.update(fix[0])
        findings.append(f"{fix[1]}; loading with {describe(fix[0])}")
    if manifest_overrides:
        overrides.update(manifest_overrides)
        findings.append(f"the model's manifest sets {describe(manifest_overrides)}")
    for key, value in overrides.items():
        if isinstance(value, str) and len(value.encode("utf-8")) > _MAX_STRING:
            raise ModelFileError(f"metadata override {key} is longer than {_MAX_STRING} bytes, the most "
                                 "llama.cpp takes")
    return LoadPlan(overrides, tuple(findings))


def describe(overrides: dict[str, OverrideValue]) -> str:
    return ", ".join(f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
                     for key, value in overrides.items())


def kv_override_array(overrides: dict[str, OverrideValue]) -> Any:
    """The overrides as llama.cpp's zero-terminated llama_model_kv_override array (None when empty); the
    caller keeps it alive until the model is loaded. The same encoding as `llama_cpp.Llama(kv_overrides=)`,
    for the batched path, which loads the model without the `Llama` wrapper."""
    import llama_cpp

    if not overrides:
        return None
    array = (llama_cpp.llama_model_kv_override * (len(overrides) + 1))()
    for entry, (key, value) in zip(array, overrides.items(), strict=False):  # the last entry ends the array
        entry.key = key.encode("utf-8")
        if isinstance(value, bool):
            entry.tag, entry.value.val_bool = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_BOOL, value
        elif isinstance(value, int):
            entry.tag, entry.value.val_i64 = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_INT, value
        elif isinstance(value, float):
            entry.tag, entry.value.val_f64 = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_FLOAT, value
        else:
            entry.tag = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_STR
            offset: int = llama_cpp.llama_model_kv_override_value.val_str.offset  # type: ignore[attr-defined]
            address = ctypes.addressof(entry.value) + offset
            ctypes.memmove(address, value.encode("utf-8") + b"\0", len(value.encode("utf-8")) + 1)
    return array
