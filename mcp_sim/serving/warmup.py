"""Warm start: a server answers `initialize` and `tools/list` at once while, in a background thread, the model
loads and each spec's system prompt is evaluated and kept. A call waits for the model and for its own spec's
system prompt only, with progress notifications when it asked for them. The model file is checked before
serving, so a missing or corrupt file still fails at startup.

Order: the spec of a call that waits goes first (specs in the order their tools are first called); the other
specs are read in the background, one at a time, only while no call is in flight, so a warm-up never holds
the model while a call could use it (a call waits at most for the one prompt being read when it came). An
indexed spec's first prompt is the one without its index (a world's first call goes without it); its index
is read last, for the later calls.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio

from mcp_sim.base.errors import EngineError
from mcp_sim.core.prompt import build_messages
from mcp_sim.core.simulator import Simulator
from mcp_sim.core.specs import SpecSet
from mcp_sim.engines.base import ChatMessage
from mcp_sim.engines.readiness import check_engine, warm_engine

logger = logging.getLogger(__name__)

# How often a waiting call reports that it is still waiting.
WAIT_REPORT_S = 1.0
# How often the background warm-up looks again whether the calls in flight are done.
IDLE_POLL_S = 0.05

ProgressReport = Callable[[float, float | None, str], Awaitable[None]]


class Warmup:
    def __init__(self, simulator: Simulator):
        self.simulator = simulator
        self.error: Exception | None = None
        self.seconds: float | None = None
        self._started = time.perf_counter()
        self._loaded = threading.Event()
        self._done = threading.Event()
        self._warmed = {spec_set.source: threading.Event() for spec_set in simulator.catalog.spec_sets}
        self._order: list[str] = []  # the specs calls are waiting for, in the order they were first called
        self._in_flight = 0
        self._changed = threading.Condition()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def check(self) -> None:
        """Raise McpSimError now if the model cannot be loaded (cheap: no weights are read)."""
        check_engine(self.simulator.engine)

    def start(self) -> threading.Thread:
        self._started = time.perf_counter()
        thread = threading.Thread(target=self._run, name="mcp-sim-warmup", daemon=True)
        thread.start()
        return thread

    def system_prompts(self) -> list[list[ChatMessage]]:
        """The system message of every spec file as a default-scenario world's calls see it: its first call,
        and, for an indexed spec, its later calls (with the index)."""
        return [self.system_prompt(spec_set, first_call) for spec_set in self.simulator.catalog.spec_sets
                for first_call in (True, False)[:1 + (spec_set.prompt_layout == "index")]]

    def system_prompt(self, spec_set: SpecSet, first_call: bool = True) -> list[ChatMessage]:
        simulator = self.simulator
        system = simulator.system_prompt(spec_set, simulator.worlds.default_scenario, first_call)
        return build_messages(system, [], "", simulator.options.prompt_style)[:1]

    @asynccontextmanager
    async def call(self, source: str, report: ProgressReport | None = None) -> AsyncIterator[None]:
        """Hold the block until the model is loaded and spec SOURCE's prompt is read (it goes first); while
        the block runs, no other spec's prompt is started. Raises EngineError if the warm-up failed."""
        with self._changed:
            self._in_flight += 1
            if source in self._warmed and not self._warmed[source].is_set() and source not in self._order:
                self._order.append(source)
            self._changed.notify_all()
        try:
            await self._wait_for(source, report)
            yield
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    async def wait(self, report: ProgressReport | None = None) -> None:
        """Return once the whole warm-up is done; raise EngineError if it failed."""
        await self._wait_until(self._done, report)

    async def _wait_for(self, source: str, report: ProgressReport | None) -> None:
        await self._wait_until(self._warmed.get(source, self._done), report)

    async def _wait_until(self, event: threading.Event, report: ProgressReport | None) -> None:
        waited = 0.0
        while not event.is_set() and self.error is None:
            if report is not None:
                what = "the system prompt to be read" if self._loaded.is_set() else "the model to load"
                await _best_effort(report, waited, f"waiting for {what} ({waited:.0f} s)")
            await anyio.sleep(WAIT_REPORT_S if report is not None else IDLE_POLL_S)
            waited += WAIT_REPORT_S if report is not None else IDLE_POLL_S
        if self.error is not None:
            raise EngineError(f"the model could not be loaded: {self.error}")

    def _run(self) -> None:
        try:
            warm_engine(self.simulator.engine, [])  # the model alone
            self._loaded.set()
            logger.warning("mcp-sim: model loaded in %.1f s", time.perf_counter() - self._started)
            while (source := self._next()) is not None:
                spec_started = time.perf_counter()
                spec_set = next(s for s in self.simulator.catalog.spec_sets if s.source == source)
                warm_engine(self.simulator.engine, [self.system_prompt(spec_set)])
                self._warmed[source].set()
                logger.info("mcp-sim: system prompt of %s read in %.1f s", source, time.perf_counter() - spec_started)
            # An indexed spec's index, which a world's first call goes without (prompt.INDEX_FIRST_CALL): read
            # for the later calls, like the other specs' prompts only while no call is in flight.
            for spec_set in self.simulator.catalog.spec_sets:
                if spec_set.prompt_layout == "index":
                    self._when_idle()
                    warm_engine(self.simulator.engine, [self.system_prompt(spec_set, first_call=False)])
        except Exception as exc:  # reported to every call that waits; the server itself keeps serving
            self.error = exc
            logger.error("mcp-sim: the model could not be loaded: %s", exc)
        finally:
            self.seconds = time.perf_counter() - self._started
            self._done.set()
            for event in self._warmed.values():
                event.set()
        if self.error is None:
            logger.warning("mcp-sim: model loaded and %d system prompt(s) read in %.1f s",
                           len(self._warmed), self.seconds)

    def _next(self) -> str | None:
        """The next spec to read: the first that a call waits for, else (once no call is in flight) the first
        not read yet; None when every spec is read."""
        with self._changed:
            while True:
                pending = [source for source, event in self._warmed.items() if not event.is_set()]
                if not pending:
                    return None
                wanted = [source for source in self._order if source in pending]
                if wanted:
                    return wanted[0]
                if self._in_flight == 0:
                    return pending[0]
                self._changed.wait(IDLE_POLL_S)


    def _when_idle(self) -> None:
        with self._changed:
            while self._in_flight:
                self._changed.wait(IDLE_POLL_S)


async def _best_effort(report: ProgressReport, progress: float, message: str) -> None:
    try:
        await report(progress, None, message)
    except Exception:  # progress is best effort; never fail a call for it
        logger.debug("progress report failed", exc_info=True)
