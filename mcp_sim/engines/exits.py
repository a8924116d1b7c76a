"""What a dead model process's exit status means to a user, and when to stop starting new ones."""

from __future__ import annotations

import signal
import time
from collections import deque

from mcp_sim.base import defaults

# What to try, by the signal that ended the model process.
_ADVICE = {
    signal.SIGSEGV: "a native crash inside llama.cpp; run `mcp-sim doctor`, which probes a decode in a child "
                    "process, and try --cpu-repack off or another --model",
    signal.SIGABRT: "llama.cpp stopped on a failed assertion (GGML_ASSERT); run `mcp-sim doctor`, and try a "
                    "smaller --ctx or --slots, or another --model",
    signal.SIGKILL: "killed from outside, often by the kernel's out-of-memory killer; lower --ctx, --slots or "
                    "--parallel, or use a smaller quant",
    signal.SIGBUS: "the model file may have changed or shrunk while mapped; download it again",
}


def describe_exit(returncode: int | None) -> str:
    """'SIGSEGV (a native crash inside llama.cpp; ...)' for a signal, else the exit status."""
    if returncode is None:
        return "its connection closed while it still ran"
    if returncode < 0:
        try:
            number = signal.Signals(-returncode)
        except ValueError:
            return f"signal {-returncode}"
        advice = _ADVICE.get(number, "run `mcp-sim doctor`")
        return f"{number.name} ({advice})"
    return f"exit status {returncode} (its log above says why)"


class CrashLog:
    """The model process's recent deaths: after RESTART_LIMIT within RESTART_WINDOW_S it is not started
    again, so that a model that dies on every call fails fast instead of reloading for ever."""

    def __init__(self, limit: int = defaults.ENGINE_RESTART_LIMIT,
                 window_s: float = defaults.ENGINE_RESTART_WINDOW_S):
        self.limit = limit
        self.window_s = window_s
        self._deaths: deque[tuple[float, str]] = deque()

    def record(self, reason: str) -> None:
        self._deaths.append((time.monotonic(), reason))

    def refusal(self) -> str | None:
        """Why no new process is started, or None when one may be."""
        now = time.monotonic()
        while self._deaths and now - self._deaths[0][0] > self.window_s:
            self._deaths.popleft()
        if len(self._deaths) < self.limit:
            return None
        return (f"the model process died {len(self._deaths)} times in {self.window_s:.0f} s (last: "
                f"{self._deaths[-1][1]}); it is not started again until {self.window_s:.0f} s have passed "
                "since the oldest of those")
