"""Check that a model file is a usable GGUF before llama.cpp sees it, and read its architecture."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from mcp_sim.base.errors import ModelFileError

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


# Value readers for read_header, by GGUF type id: uint8, int8, uint16, int16, uint32, int32, float32, bool,
# (8: string), (9: array), uint64, int64, float64.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_GGUF_ARRAY = 9
_SPLIT = re.compile(r"-00001-of-(\d{5})\.gguf$")


@dataclass
class GgufHeader:
    """What a GGUF says about itself, read without llama.cpp: scalar metadata, the length of each array,
    and the name of every tensor (of every part, for a split model)."""

    metadata: dict[str, int | float | bool | str] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)
    tensors: list[str] = field(default_factory=list)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))


def read_header(path: Path) -> GgufHeader:
    """The header of `path` and, for the first part of a split model, of its other parts' tensor lists.

    Raises ModelFileError when the file is not a readable GGUF (version 2 or 3)."""
    header = GgufHeader()
    _read_into(path, header, metadata=True)
    match = _SPLIT.search(path.name)
    if match is not None:
        head, total = path.name[: match.start()], int(match.group(1))
        for part in range(2, total + 1):
            sibling = path.with_name(f"{head}-{part:05d}-of-{total:05d}.gguf")
            if sibling.exists():
                _read_into(sibling, header, metadata=False)
    return header


def _read_into(path: Path, header: GgufHeader, metadata: bool) -> None:
    try:
        with path.open("rb", buffering=1 << 20) as handle:
            magic, version, tensors, count = _HEADER.unpack(handle.read(_HEADER.size))
            if magic != GGUF_MAGIC or version not in (2, 3):
                raise ModelFileError(f"{path} is not a GGUF file of version 2 or 3")
            for _ in range(count):
                key = _string(handle)
                kind = _unpack(handle, "<I")
                if kind == _GGUF_ARRAY:
                    header.array_lengths[key] = _skip_array(handle)
                else:
                    value = _value(handle, kind)
                    if metadata:
                        header.metadata[key] = value
            for _ in range(tensors):
                header.tensors.append(_string(handle))
                dims = _unpack(handle, "<I")
                handle.seek(8 * dims + 4 + 8, 1)  # dimensions, type, offset
    except (OSError, struct.error, UnicodeDecodeError) as exc:
        raise ModelFileError(f"the GGUF header of {path} cannot be read ({exc}): download it again") from exc


def _unpack(handle: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = handle.read(size)
    if len(data) < size:
        raise struct.error("the file ends inside its header")
    return struct.unpack(fmt, data)[0]


def _string(handle: BinaryIO) -> str:
    return handle.read(_unpack(handle, "<Q")).decode("utf-8")


def _value(handle: BinaryIO, kind: int) -> int | float | bool | str:
    if kind == _GGUF_STRING:
        return _string(handle)
    if kind not in _SCALARS:
        raise struct.error(f"unknown metadata type {kind}")
    value: int | float | bool | str = _unpack(handle, _SCALARS[kind])
    return value


def _skip_array(handle: BinaryIO) -> int:
    kind, length = _unpack(handle, "<I"), _unpack(handle, "<Q")
    if kind == _GGUF_STRING:  # a vocabulary: each string says its own length
        for _ in range(length):
            handle.seek(_unpack(handle, "<Q"), 1)
    elif kind in _SCALARS:
        handle.seek(struct.calcsize(_SCALARS[kind]) * length, 1)
    else:
        raise struct.error(f"unsupported array element type {kind}")
    return int(length)


def open_model(path: Path, params: Any, verbose: bool = False) -> Any:
    """llama-cpp-python's LlamaModel for PATH, loaded without its suppress_stdout_stderr: that points fd 1 and
    2 (and sys.stdout, sys.stderr) at /dev/null for the whole process during the load, and another thread's
    output (the startup line among it) was lost. llama.cpp's log is dropped below errors instead."""
    from llama_cpp._internals import LlamaModel
    from llama_cpp._logger import set_verbose

    set_verbose(verbose)
    return LlamaModel(path_model=str(path), params=params, verbose=True)  # True: no suppress_stdout_stderr


def load_vocabulary(path: Path) -> Any:
    """The model's vocabulary and metadata without its weights (llama.cpp's vocab_only load)."""
    import llama_cpp

    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    return open_model(path, params)


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
