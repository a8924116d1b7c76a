"""Warm start: a server answers `initialize` and `tools/list` at once while, in a background thread, the model
loads and every spec's system prompt is evaluated and kept; a call that arrives before then waits, with
progress notifications when it asked for them. The model file is checked before serving, so a missing or
corrupt file still fails at startup."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable

import anyio

from mcp_sim.engines.base import ChatMessage
from mcp_sim.engines.readiness import check_engine, warm_engine
from mcp_sim.errors import EngineError
from mcp_sim.prompt import build_messages
from mcp_sim.simulator import Simulator

logger = logging.getLogger(__name__)

# How often a waiting call reports that it is still waiting.
WAIT_REPORT_S = 1.0

ProgressReport = Callable[[float, float | None, str], Awaitable[None]]


class Warmup:
    def __init__(self, simulator: Simulator):
        self.simulator = simulator
        self.error: Exception | None = None
        self.seconds: float | None = None
        self._done = threading.Event()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def check(self) -> None:
        """Raise McpSimError now if the model cannot be loaded (cheap: no weights are read)."""
        check_engine(self.simulator.engine)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="mcp-sim-warmup", daemon=True)
        thread.start()
        return thread

    def system_prompts(self) -> list[list[ChatMessage]]:
        """The system message of every spec file, as the first call in a default-scenario world sees it."""
        simulator = self.simulator
        scenario = simulator.worlds.default_scenario
        return [build_messages(simulator.system_prompt(spec_set, scenario), [], "", simulator.options.prompt_style)[:1]
                for spec_set in simulator.catalog.spec_sets]

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            warm_engine(self.simulator.engine, self.system_prompts())
        except Exception as exc:  # reported to every call that waits; the server itself keeps serving
            self.error = exc
            logger.error("mcp-sim: the model could not be loaded: %s", exc)
        finally:
            self.seconds = time.perf_counter() - started
            self._done.set()
        if self.error is None:
            logger.warning("mcp-sim: model loaded and %d system prompt(s) read in %.1f s",
                           len(self.simulator.catalog.spec_sets), self.seconds)

    async def wait(self, report: ProgressReport | None = None) -> None:
        """Return once the warm-up is done; raise EngineError if it failed."""
        waited = 0.0
        while not self._done.is_set():
            if report is not None:
                await _best_effort(report, waited, f"waiting for the model to load ({waited:.0f} s)")
            await anyio.sleep(WAIT_REPORT_S)
            waited += WAIT_REPORT_S
        if self.error is not None:
            raise EngineError(f"the model could not be loaded: {self.error}")


async def _best_effort(report: ProgressReport, progress: float, message: str) -> None:
    try:
        await report(progress, None, message)
    except Exception:  # progress is best effort; never fail a call for it
        logger.debug("progress report failed", exc_info=True)
