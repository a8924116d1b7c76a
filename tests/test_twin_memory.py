"""`doctor`'s memory estimate against what llama.cpp really takes (issue 23).

A fresh process loads the twin (tests/twin.py) with the engine and reads one prompt that fills the context;
its RSS growth from just before loading (llama_cpp and mcp_sim already imported) must be within 20% of what
`doctor` estimates for the same settings with no state cache. On a 2.5 MB model the costs that do not scale
with the weights are everything: llama.cpp's runtime and, without flash attention, the attention scores of a
512-token batch, which grow with the context. benchmarks/bench_twin_memory.py prints the same comparison for
more settings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcp_sim.engines.llama.doctor import memory_estimate, model_memory
from mcp_sim.engines.llama.gguf import read_metadata
from tests.conftest import REPO, subprocess_env
from tests.twin import build_twin

TOLERANCE = 0.20
# Share of the context the prompt fills: the estimate is for a full context, the prompt leaves room for an answer.
FILL = 0.95

# Runs in the measured process: RSS before loading, after loading, after the prompt (JSON on stdout).
_CHILD = r"""
import json, sys
import llama_cpp  # noqa: F401  (imported before the first reading: the library is not what is measured)
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

path, ctx, slots, fill = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[5])
flash_attn = sys.argv[4] == "1"
before = rss()
engine = LlamaEngine(path, n_ctx=ctx, n_threads=2, n_gpu_layers=0, slots=slots, flash_attn=flash_attn,
                     state_cache_mb=0)
engine.load()
loaded = rss()
unit = "the tool returns the result of the call as JSON; "
def prompt(repeats):
    return [ChatMessage("user", unit * repeats)]
empty, hundred = engine.count_tokens(prompt(0)), engine.count_tokens(prompt(100))
messages = prompt(int((fill * ctx - empty) * 100 / (hundred - empty)))
tokens = engine.count_tokens(messages)
engine.generate(GenerationRequest(messages=messages, max_tokens=1, temperature=0.0))
print(json.dumps({"before": before, "loaded": loaded, "after": rss(), "tokens": tokens}))
"""


@dataclass(frozen=True)
class Measurement:
    estimate: int  # doctor's, bytes
    loaded: int  # RSS growth after loading, bytes
    after: int  # RSS growth after the prompt, bytes
    tokens: int  # the prompt's

    @property
    def difference(self) -> float:
        """The estimate against the measured growth: +0.10 is 10% over."""
        return self.estimate / self.after - 1


def estimate(model: Path, ctx: int, slots: int, flash_attn: bool) -> int:
    """doctor's estimate for one instance on the CPU, with no state cache."""
    shape = model_memory(model, read_metadata(model))
    assert shape is not None
    return memory_estimate(shape, ctx, instances=1, slots=slots, state_cache=0, gpu=False, flash_attn=flash_attn)[0]


def measure(model: Path, ctx: int, slots: int = 1, flash_attn: bool = False, fill: float = FILL) -> Measurement:
    """Load MODEL in a fresh process and read a prompt filling FILL of the context of one slot."""
    done = subprocess.run([sys.executable, "-c", _CHILD, str(model), str(ctx), str(slots), str(int(flash_attn)),
                           str(fill)], env=subprocess_env(), cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    rss = json.loads(done.stdout.strip().splitlines()[-1])
    return Measurement(estimate(model, ctx, slots, flash_attn), rss["loaded"] - rss["before"],
                       rss["after"] - rss["before"], rss["tokens"])


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_twin(tmp_path_factory.mktemp("twin") / "twin.gguf")


@pytest.mark.parametrize(("ctx", "slots", "flash_attn"), [(16384, 1, False), (8192, 2, True)],
                         ids=["ctx16384", "ctx8192-2slots-flash"])
def test_the_estimate_is_within_20_percent_of_the_measured_rss(twin: Path, ctx: int, slots: int,
                                                               flash_attn: bool) -> None:
    measured = measure(twin, ctx, slots, flash_attn)
    assert measured.tokens > 0.9 * ctx
    mib = 1024**2
    assert abs(measured.difference) <= TOLERANCE, (
        f"estimate {measured.estimate / mib:.1f} MiB, RSS grew {measured.loaded / mib:.1f} MiB loading and "
        f"{measured.after / mib:.1f} MiB after a prompt of {measured.tokens} tokens: {measured.difference:+.0%}")
