"""The model in a process of its own, behind the Engine interface, for any engine kind: a native fault in
the model (a llama.cpp crash, a GGML_ASSERT, the out-of-memory killer) ends the calls it was answering with
an EngineError that names the signal, and the next call starts a new process whose prompts come back from
the prompt store. The server, its worlds, caches and ledger never share the model's fate.

Ollama, vLLM and llama.cpp's own server keep the model apart for the same reason."""

from __future__ import annotations

import dataclasses
import io
import itertools
import logging
import queue
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from mcp_sim.base.errors import EngineError, McpSimError
from mcp_sim.engines.base import ChatMessage, Engine, EngineIdentity, Generation, GenerationRequest
from mcp_sim.engines.counting import TextCounting
from mcp_sim.engines.exits import CrashLog, describe_exit
from mcp_sim.engines.kind import EngineKind, ModelChoice
from mcp_sim.engines.pool import EnginePool
from mcp_sim.engines.readiness import check_engine
from mcp_sim.engines.settings import EngineSettings
from mcp_sim.engines.subprocesses import child_environment, module_command
from mcp_sim.engines.worker.wire import Recipe, request_payload

logger = logging.getLogger(__name__)

# How often a waiting call looks at its cancel event (seconds).
_CANCEL_POLL_S = 0.05
# How long a closing model process may take to free its model before it is killed (seconds).
_CLOSE_GRACE_S = 10.0


def _stderr_fd() -> int:
    """The descriptor the model process writes to: this process's stderr, or fd 2 when sys.stderr is a
    stand-in without one (click's CliRunner, a captured stream)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return 2


class ModelProcess:
    """One running child: its process, its connection, and the calls waiting on it."""

    def __init__(self, recipe: Recipe, on_death: Any):
        parent, child = socket.socketpair()
        # stdout is our stderr: on stdio, fd 1 is the MCP stream, and nothing of the model's may reach it.
        self.process = subprocess.Popen(
            module_command("mcp_sim.engines.worker.child", str(child.fileno())), pass_fds=(child.fileno(),),
            stdin=subprocess.DEVNULL, stdout=_stderr_fd(), env=child_environment())
        child.close()
        self.connection = Connection(parent.detach())
        self.connection.send(recipe)
        self._send_lock = threading.Lock()
        self._pending: dict[int, queue.Queue[tuple[str, Any]]] = {}
        self._pending_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.death: str | None = None
        self._on_death = on_death
        threading.Thread(target=self._read, daemon=True, name="model-process-reader").start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def call(self, op: str, payload: Any = None, request: GenerationRequest | None = None) -> Any:
        """Run OP in the child and wait for its answer; tokens and cancellation pass through for a request."""
        replies: queue.Queue[tuple[str, Any]] = queue.Queue()
        call_id = next(self._ids)
        with self._pending_lock:
            if self.death is not None:
                raise EngineError(self.death)
            self._pending[call_id] = replies
        try:
            self._send(op, call_id, payload)
            cancelled = False
            while True:
                try:
                    kind, value = replies.get(timeout=_CANCEL_POLL_S)
                except queue.Empty:
                    if request is not None and request.cancel.is_set() and not cancelled:
                        cancelled = True
                        self._send("cancel", call_id, None)
                    continue
                if kind == "token":
                    if request is not None and request.on_token is not None:
                        request.on_token(value)
                elif kind == "done":
                    return value
                elif kind == "error":
                    raise value
                else:  # "died"
                    raise EngineError(value)
        finally:
            with self._pending_lock:
                self._pending.pop(call_id, None)

    def _send(self, *message: Any) -> None:
        try:
            with self._send_lock:
                self.connection.send(message)
        except OSError:
            pass  # the reader sees the death and tells every waiting call

    def _read(self) -> None:
        while True:
            try:
                kind, call_id, value = self.connection.recv()
            except (EOFError, OSError):
                break
            with self._pending_lock:
                replies = self._pending.get(call_id)
            if replies is not None:
                replies.put((kind, value))
        try:
            returncode = self.process.wait(timeout=_CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            returncode = None
        reason = describe_exit(returncode)
        with self._pending_lock:
            self.death = (f"the model process (pid {self.process.pid}) died: {reason}. The server keeps serving "
                          "and starts a new model process for the next call; worlds, caches and the ledger "
                          "are as they were")
            waiting = list(self._pending.values())
        for replies in waiting:
            replies.put(("died", self.death))
        self._on_death(self, reason)

    def close(self) -> None:
        self._send("close", 0, None)
        try:
            self.process.wait(timeout=_CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.connection.close()


class WorkerEngine:
    """An engine of any kind whose decoding runs in a model process (ModelProcess). LOCAL, the same engine
    built here and never loaded, answers what needs no decoding (the context size, schema support, text
    token counts from the vocabulary), so the server never holds the weights itself."""

    def __init__(self, kind: str, settings: EngineSettings, choice: ModelChoice, ctx: int, local: Engine,
                 crashes: CrashLog | None = None):
        self.name = local.name
        self._recipe = Recipe(kind, dataclasses.replace(settings, parallel=1), choice, ctx,
                              logging.getLogger().getEffectiveLevel())
        self._local = local
        self._crashes = crashes or CrashLog()
        self._lock = threading.Lock()
        self._process: ModelProcess | None = None
        self._loaded = False
        # The prompts warmed so far: a new process reads them again (from the prompt store, when there is one).
        self._warmed: list[list[ChatMessage]] = []
        self.restarts = 0

    @property
    def capacity(self) -> int:
        return self._local.capacity

    @property
    def context_size(self) -> int:
        return self._local.context_size

    @property
    def pid(self) -> int | None:
        """The model process's pid, when one runs (tests kill it)."""
        process = self._process
        return process.pid if process is not None and process.death is None else None

    def identity(self) -> EngineIdentity:
        return self._local.identity()

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return self._local.schema_support(json_schema)

    def count_text_tokens(self, text: str) -> int:
        if isinstance(self._local, TextCounting):
            return self._local.count_text_tokens(text)
        raise McpSimError("this engine has no tokenizer at hand")  # count_text estimates instead

    def check(self) -> None:
        check_engine(self._local)

    def load(self) -> None:
        self._running()

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        self._running().call("warm", prompts)
        with self._lock:
            self._warmed.extend(prompts)

    def forget(self) -> None:
        self._running().call("forget")

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        return int(self._running().call("count_tokens", messages))

    def generate(self, request: GenerationRequest) -> Generation:
        result: Generation = self._running().call("generate", request_payload(request), request)
        return result

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.death is None:
            process.close()

    def _running(self) -> ModelProcess:
        """The model process, started (and loaded, and warmed as before) when none runs."""
        with self._lock:
            process = self._process
            if process is not None and process.death is None:
                return process
            refusal = self._crashes.refusal()
            if refusal is not None:
                raise EngineError(refusal)
            restarting = process is not None
            started = time.perf_counter()
            process = ModelProcess(self._recipe, self._died)
            self._process = process
            process.call("load")
            if self._warmed:
                process.call("warm", self._warmed)
            if restarting:
                self.restarts += 1
                logger.warning("mcp-sim: model process restarted (pid %d) in %.1f s", process.pid,
                               time.perf_counter() - started)
            return process

    def _died(self, process: ModelProcess, reason: str) -> None:
        if process.process.returncode is not None and process.process.returncode == 0:
            return  # closed
        self._crashes.record(reason)
        logger.error("mcp-sim: the model process (pid %d) died: %s", process.pid, reason)


def build_engine(kind: EngineKind, settings: EngineSettings, choice: ModelChoice, ctx: int) -> Engine:
    """KIND's engine for SETTINGS: in model processes of its own (one per --parallel instance, behind one
    pool) when --engine-process says so, or by default for a kind that runs the model in this process."""
    worker = settings.engine_process == "worker" or (settings.engine_process == "auto" and kind.in_process)
    if not worker:
        return kind.build(settings, choice, ctx)
    one = dataclasses.replace(settings, parallel=1)
    engines = [WorkerEngine(kind.name, one, choice, ctx, kind.build(one, choice, ctx))
               for _ in range(settings.parallel)]
    return engines[0] if len(engines) == 1 else EnginePool(engines)
