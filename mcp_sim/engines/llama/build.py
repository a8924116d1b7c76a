"""What this llama.cpp build can do, and how many threads to give it."""

from __future__ import annotations

import os
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
