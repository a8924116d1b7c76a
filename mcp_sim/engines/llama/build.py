"""What this llama.cpp build can do, and how many threads to give it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from mcp_sim.base import defaults


def gpu_offload_supported() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def build_info() -> dict[str, Any]:
    """What this llama.cpp build can do, for `doctor` and logs."""
    import llama_cpp

    system_info = llama_cpp.llama_print_system_info().decode(errors="replace")
    return {"llama_cpp_python": llama_cpp.__version__, "gpu_offload": gpu_offload_supported(),
            "system_info": system_info.strip()}


def default_threads() -> int:
    """Threads when --threads is not given: every core on a small machine (each one helps), else half the cores
    (llama.cpp's own choice, leaving hyper-threads idle), never fewer than on a small machine."""
    cores = os.cpu_count() or 1
    small = defaults.THREADS_ALL_CORES_UP_TO
    return cores if cores <= small else max(cores // 2, small)


# llama.cpp's system info on a CPU with AMX (Intel Sapphire Rapids and later).
_AMX = re.compile(r"\bAMX_INT8\s*=\s*1\b")


@dataclass(frozen=True)
class RepackChoice:
    """Whether the model loads with llama.cpp's extra CPU buffer types (repacked weights), and why."""

    use_extra_bufts: bool
    reason: str
    amx: bool  # the CPU has AMX, where repacked weights crash (llama.cpp #20824)


def repack_choice(setting: str, system_info: str) -> RepackChoice:
    """--cpu-repack SETTING on a build whose system info is SYSTEM_INFO. On AMX, llama.cpp repacks the weights
    into its AMX buffer type and the first decode segfaults in ggml_backend_amx_mul_mat (llama.cpp #20824,
    Ollama #17205): "auto" then loads them as they are in the file, which answers the same."""
    amx = bool(_AMX.search(system_info))
    if setting == "on":
        warning = " (this CPU has AMX: llama.cpp #20824 may crash the first decode)" if amx else ""
        return RepackChoice(True, f"on, as --cpu-repack on asks{warning}", amx)
    if setting == "off":
        return RepackChoice(False, "off, as --cpu-repack off asks", amx)
    if amx:
        return RepackChoice(False, "off: this CPU has AMX (AMX_INT8 = 1), where llama.cpp's repacked AMX "
                                   "weights crash the first decode (llama.cpp #20824); --cpu-repack on forces it", amx)
    return RepackChoice(True, "on: no AMX on this CPU, so llama.cpp may repack weights for its faster kernels",
                        amx)


def cpu_repack(setting: str) -> RepackChoice:
    """repack_choice for this machine's llama.cpp build."""
    return repack_choice(setting, build_info()["system_info"])
