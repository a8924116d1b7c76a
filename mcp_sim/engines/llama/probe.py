"""`python -m mcp_sim.engines.llama.probe MODEL CPU_REPACK`: load MODEL and decode a few tokens, then print
how long that took. `doctor` runs it in a child process: a native crash (llama.cpp #20824 on AMX CPUs)
then shows as the child's signal instead of taking doctor down."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine

PROBE_CTX = 512
PROBE_TOKENS = 4


def main(model: str, cpu_repack: str) -> None:
    started = time.perf_counter()
    engine = LlamaEngine(Path(model), n_ctx=PROBE_CTX, cpu_repack=cpu_repack)
    try:
        generation = engine.generate(GenerationRequest([ChatMessage("user", "Say hello.")],
                                                       max_tokens=PROBE_TOKENS))
    finally:
        engine.close()
    print(f"{generation.completion_tokens} token(s) decoded in {time.perf_counter() - started:.1f} s, "
          "load included")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
