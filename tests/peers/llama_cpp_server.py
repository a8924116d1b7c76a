"""`python -m llama_cpp.server` with mcp-sim's --cpu-repack auto decision applied to every model it loads.

llama_cpp.server has no option for llama_model_params.use_extra_bufts, and on a CPU with AMX its first decode
segfaults (llama.cpp #20824), as mcp-sim's own engine would without the same choice. The defaults the server's
Llama reads are wrapped, then the server's own entry point runs with the arguments given.
"""

from __future__ import annotations

import sys

import llama_cpp
import llama_cpp.llama
from llama_cpp.server.__main__ import main

from mcp_sim.engines.llama.build import cpu_repack

_defaults = llama_cpp.llama_model_default_params


def _model_params() -> llama_cpp.llama_model_params:
    params = _defaults()
    params.use_extra_bufts = cpu_repack("auto").use_extra_bufts
    return params


llama_cpp.llama_model_default_params = _model_params
llama_cpp.llama.llama_cpp.llama_model_default_params = _model_params

if __name__ == "__main__":
    sys.argv[0] = "llama_cpp.server"
    main()
