"""The model process: `python -m mcp_sim.engines.worker.child FD` builds one engine of any kind from the
recipe its parent sends over the socket FD and answers the parent's calls on it, each in a thread of its
own, so that calls decode together (--slots) and a cancel reaches the call it names.

Its stdout is the parent's stderr (a native library's prints never reach an MCP client's stdio stream);
its stderr is the parent's stderr too, for its log."""

from __future__ import annotations

import logging
import pickle
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

from mcp_sim.base.errors import EngineError
from mcp_sim.engines.base import Engine, GenerationRequest
from mcp_sim.engines.readiness import warm_engine
from mcp_sim.engines.registry import engine_kind
from mcp_sim.engines.worker.wire import Recipe


def main(fd: int) -> None:
    connection = Connection(fd)
    recipe: Recipe = connection.recv()
    logging.basicConfig(level=recipe.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s (model process): %(message)s")
    engine = engine_kind(recipe.kind).build(recipe.settings, recipe.choice, recipe.ctx)
    Serving(engine, connection).run()


class Serving:
    """One engine answering one parent."""

    def __init__(self, engine: Engine, connection: Connection):
        self.engine = engine
        self.connection = connection
        self._send_lock = threading.Lock()
        self._cancels: dict[int, threading.Event] = {}

    def run(self) -> None:
        try:
            while True:
                try:
                    op, call_id, payload = self.connection.recv()
                except (EOFError, OSError):
                    return  # the parent is gone
                if op == "cancel":
                    event = self._cancels.get(call_id)
                    if event is not None:
                        event.set()
                elif op == "close":
                    return
                else:
                    if op == "generate":
                        self._cancels[call_id] = threading.Event()
                    threading.Thread(target=self._answer, args=(op, call_id, payload), daemon=True,
                                     name=f"model-call-{call_id}").start()
        finally:
            self.engine.close()

    def _send(self, *message: Any) -> None:
        with self._send_lock:
            self.connection.send(message)

    def _answer(self, op: str, call_id: int, payload: Any) -> None:
        try:
            value = self._do(op, call_id, payload)
        except BaseException as exc:  # every failure goes back to the call that caused it
            self._send("error", call_id, _portable(exc))
        else:
            self._send("done", call_id, value)
        finally:
            self._cancels.pop(call_id, None)

    def _do(self, op: str, call_id: int, payload: Any) -> Any:
        if op == "generate":
            request = GenerationRequest(**payload, cancel=self._cancels[call_id],
                                        on_token=lambda count: self._send("token", call_id, count))
            return self.engine.generate(request)
        if op == "load":
            return self.engine.load()
        if op == "warm":
            return warm_engine(self.engine, payload)
        if op == "count_tokens":
            return self.engine.count_tokens(payload)
        if op == "forget":
            forget = getattr(self.engine, "forget", None)  # an optional test hook of the llama engine
            return forget() if forget is not None else None
        raise EngineError(f"the model process has no operation {op!r}")


def _portable(exc: BaseException) -> BaseException:
    """EXC itself when it survives pickling, else an EngineError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # any exception type may refuse pickling
        return EngineError(f"{type(exc).__name__}: {exc}")
    return exc


if __name__ == "__main__":
    main(int(sys.argv[1]))
