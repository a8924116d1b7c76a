"""Check that a model file is a usable GGUF before llama.cpp sees it, and read its architecture."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from mcp_sim.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
# Header: magic, version (u32), tensor count (u64), metadata count (u64).
_HEADER = struct.Struct("<4sIQQ")


def check_gguf_file(path: Path) -> None:
    """Fail fast, naming the path, when the file is missing, empty or not GGUF."""
    if not path.exists():
        raise ModelFileError(f"model file {path} does not exist: check the path passed to --model, or omit "
                             "--model to use the bundled SmolLM2-135M-Instruct")
    if not path.is_file():
        raise ModelFileError(f"model path {path} is not a file: pass the .gguf file itself to --model")
    with path.open("rb") as handle:
        header = handle.read(_HEADER.size)
    if header[:4] != GGUF_MAGIC[: len(header)] or not header:
        raise ModelFileError(f"model file {path} is not a GGUF file (it starts with {header[:4]!r}, not b'GGUF'): "
                             "mcp-sim runs GGUF models; convert it or download a GGUF quant")
    if len(header) < _HEADER.size:
        raise ModelFileError(f"model file {path} is truncated ({len(header)} bytes): download it again")
    _, version, tensors, _ = _HEADER.unpack(header)
    if version not in (1, 2, 3):
        raise ModelFileError(f"model file {path} has GGUF version {version}, which this build does not read")
    if tensors == 0:
        raise ModelFileError(f"model file {path} holds no tensors: it is a vocabulary-only or broken file")


# GGUF metadata value types with a fixed size, by type id (uint8 .. float64, bool); 8 is a string.
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING = 8


def gguf_architecture(path: Path) -> str | None:
    """`general.architecture` from the GGUF header, read without llama.cpp (None when not found early)."""
    try:
        with path.open("rb") as handle:
            magic, _, _, count = _HEADER.unpack(handle.read(_HEADER.size))
            if magic != GGUF_MAGIC:
                return None
            for _ in range(min(count, 64)):  # writers put general.* first; stop at anything unexpected
                key = handle.read(struct.unpack("<Q", handle.read(8))[0]).decode("utf-8", "replace")
                kind = struct.unpack("<I", handle.read(4))[0]
                if kind == _GGUF_STRING:
                    value = handle.read(struct.unpack("<Q", handle.read(8))[0])
                    if key == "general.architecture":
                        return value.decode("utf-8", "replace")
                elif kind in _SCALAR_SIZES:
                    handle.read(_SCALAR_SIZES[kind])
                else:
                    return None
    except (OSError, struct.error):
        return None
    return None


def load_vocabulary(path: Path) -> Any:
    """The model's vocabulary and metadata without its weights (llama.cpp's vocab_only load)."""
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    return LlamaModel(path_model=str(path), params=params, verbose=False)


def read_metadata(path: Path) -> dict[str, str]:
    """The GGUF's metadata as llama.cpp reads it, loading the vocabulary only (fast even for 20 GB files).

    Raises ModelFileError when this llama.cpp build cannot load the file, e.g. an unknown architecture."""
    check_gguf_file(path)
    try:
        model = load_vocabulary(path)
    except (ValueError, RuntimeError) as exc:
        architecture = gguf_architecture(path) or "unknown"
        raise ModelFileError(f"this llama.cpp build cannot load {path} (architecture {architecture}): {exc}. "
                             "The file may be damaged, or its architecture newer than the build: upgrade "
                             "llama-cpp-python (see docs/MODELS.md)") from exc
    try:
        return dict(model.metadata())
    finally:
        model.close()
