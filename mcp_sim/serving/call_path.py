"""The one path a call in a world takes through the MCP layer, for tools/call and resources/read alike: wait
for the model and the spec's system prompt (warm-up), take the world's turn (scheduler), answer off the event
loop with progress and cancellation, and map what cannot become a result onto MCP.

What the simulator settles comes back as a SimulationResult; a JSON-RPC error it settled (an injected
`protocol_error`) is raised here as MCPError, for either request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.shared.exceptions import MCPError

from mcp_sim.base.errors import BusyError, McpSimError
from mcp_sim.base.result import SimulationResult
from mcp_sim.core.simulator import Simulator
from mcp_sim.core.specs import ToolSpec
from mcp_sim.serving.scheduler import FairScheduler

if TYPE_CHECKING:
    from mcp_sim.serving.warmup import Warmup

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.25
# With no other progress for this long, a call that asked for progress is told the server still works on it.
HEARTBEAT_S = 5.0

SendProgress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class ProgressChannel:
    """A call's progress notifications: always increasing (MCP requires it, across waiting and decoding), and
    a heartbeat while nothing else reports (waiting for a turn, reading the prompt), so that clients which
    reset their timeout on progress (the MCP Inspector, the TypeScript SDK) keep waiting."""

    def __init__(self, send: SendProgress, label: str):
        self._send = send
        self._label = label
        self._last = 0.0
        self._stamp = time.monotonic()

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        self._last = max(progress, self._last + 1)
        self._stamp = time.monotonic()
        try:
            await self._send(self._last, total, message)
        except Exception:  # progress is best effort; never fail a call for it
            logger.debug("progress report failed", exc_info=True)

    @asynccontextmanager
    async def heartbeat(self) -> AsyncIterator[None]:
        failure: BaseException | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(self._beat)
            try:
                yield
            except BaseException as exc:  # re-raised below as itself, not wrapped in the group's ExceptionGroup
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure

    async def _beat(self) -> None:
        while True:
            await anyio.sleep(HEARTBEAT_S)
            if time.monotonic() - self._stamp >= HEARTBEAT_S:
                await self(self._last, None, f"{self._label}: still working")


async def answer_in_world(simulator: Simulator, tool: ToolSpec, arguments: dict[str, Any] | None, world: str,
                          scenario: str | None, *, send_progress: SendProgress, label: str,
                          scheduler: FairScheduler, warmup: Warmup | None = None,
                          client: dict[str, Any] | None = None) -> SimulationResult:
    """The settled answer to one call of TOOL in WORLD; MCPError for a protocol error the simulator settled."""
    progress = ProgressChannel(send_progress, label)
    started = time.perf_counter()
    # A call waits for the model and its own spec's system prompt, never for the other specs'.
    source = tool.spec_set.source if tool.spec_set is not None else ""
    warm = nullcontext() if warmup is None else warmup.call(source, progress)
    try:
        async with progress.heartbeat(), warm, scheduler.slot(world):
            result = await _off_loop(simulator, progress, tool, arguments, world, scenario, client, label)
    except BusyError as exc:  # the world's queue is full
        result = simulator.refused(str(exc), "queue", world, started)
    except McpSimError as exc:  # the warm-up failed: the model cannot answer
        result = simulator.refused(str(exc), "engine", world, started)
    if result.protocol_error is not None:  # the client gets the JSON-RPC error the fault asked for
        raise MCPError(result.protocol_error.code, result.protocol_error.message)
    return result


async def _off_loop(simulator: Simulator, progress: ProgressChannel, tool: ToolSpec,
                    arguments: dict[str, Any] | None, world: str, scenario: str | None,
                    client: dict[str, Any] | None, label: str) -> SimulationResult:
    """Run the blocking call in a worker thread; report progress; stop decoding when cancelled."""
    cancel = threading.Event()
    last_report = [0.0]

    def on_progress(tokens: int, budget: int) -> None:
        now = time.monotonic()
        if now - last_report[0] < PROGRESS_INTERVAL_S:
            return
        last_report[0] = now
        try:
            anyio.from_thread.run(progress, float(tokens), float(budget), f"simulating {label}: {tokens} tokens")
        except Exception:  # progress is best effort; never fail a call for it
            logger.debug("progress report failed", exc_info=True)

    def run() -> SimulationResult:
        try:
            return simulator.answer_call(tool, arguments, world, on_progress=on_progress, cancel=cancel,
                                         scenario=scenario, client=client)
        except McpSimError as exc:  # outside the answer itself (the world's store): this call fails alone
            logger.error("simulation of %s failed: %s", label, exc)
            return simulator.refused(f"Simulation failed: {exc}", "engine", world)
        except Exception as exc:  # a bug: this call fails, the server and the others go on
            logger.exception("simulation of %s failed unexpectedly", label)
            return simulator.refused(f"Simulation failed: internal error ({type(exc).__name__}: {exc}); nothing "
                                     "was executed. The server log has the traceback.", "engine", world)

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise
