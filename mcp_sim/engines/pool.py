"""Several instances of one engine answering calls side by side (`--parallel N`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from mcp_sim.engines.base import ChatMessage, Engine, EngineIdentity, Generation, GenerationRequest
from mcp_sim.engines.counting import count_text
from mcp_sim.engines.readiness import check_engine, warm_engine

# Conversations remembered for routing; older ones are simply routed to any instance with room.
MAX_AFFINITIES = 4096
# How often a waiting call looks at its cancel event: an Event cannot wake a Condition, so waits are short.
CANCEL_POLL_S = 0.05


class EnginePool:
    """Hands each call to an instance with free capacity (an instance with --slots N decodes N calls at once),
    preferring the one that served its conversation last: that instance still holds the conversation's model
    state, so the call resumes instead of re-reading. A call that finds every instance full waits, and stops
    waiting when it is cancelled."""

    def __init__(self, engines: Sequence[Engine]):
        if not engines:
            raise ValueError("an engine pool needs at least one engine")
        self.engines = list(engines)
        self.name = engines[0].name
        self._busy = [0] * len(engines)  # calls each instance is answering now
        self._affinity: OrderedDict[str, int] = OrderedDict()
        self._ready = threading.Condition()

    @property
    def capacity(self) -> int:
        return sum(engine.capacity for engine in self.engines)

    @property
    def context_size(self) -> int:
        return self.engines[0].context_size

    def identity(self) -> EngineIdentity:
        return self.engines[0].identity()  # the instances run one model

    def load(self) -> None:
        for engine in self.engines:
            engine.load()

    def check(self) -> None:
        check_engine(self.engines[0])  # the instances share one model file

    def count_text_tokens(self, text: str) -> int:
        return count_text(self.engines[0], text)[0]

    def warm(self, prompts: list[list[ChatMessage]]) -> None:
        for engine in self.engines:
            warm_engine(engine, prompts)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        # Any instance will do: engines count tokens without waiting for a generation in progress.
        return self.engines[0].count_tokens(messages)

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return self.engines[0].schema_support(json_schema)

    def generate(self, request: GenerationRequest) -> Generation:
        index = self._acquire(request)
        if index is None:
            return Generation("", 0, 0, "cancelled", evaluated_tokens=0)
        try:
            return self.engines[index].generate(request)
        finally:
            with self._ready:
                if request.cache_key is not None:
                    self._affinity[request.cache_key] = index
                    self._affinity.move_to_end(request.cache_key)
                    if len(self._affinity) > MAX_AFFINITIES:
                        self._affinity.popitem(last=False)
                self._busy[index] -= 1
                self._ready.notify_all()

    def _acquire(self, request: GenerationRequest) -> int | None:
        """An instance with room for the call, now taken; None when the call was cancelled while it waited."""
        with self._ready:
            while (index := self._choose(request)) is None:
                if request.cancel.is_set():
                    return None
                self._ready.wait(CANCEL_POLL_S)
            self._busy[index] += 1
            return index

    def _choose(self, request: GenerationRequest) -> int | None:
        free = [i for i, engine in enumerate(self.engines) if self._busy[i] < engine.capacity]
        # The conversation's own instance first, then that of a conversation it continues (a fork's origin).
        for key in (request.cache_key, *request.related_cache_keys):
            preferred = self._affinity.get(key) if key is not None else None
            if preferred in free:
                return preferred
        return min(free, key=lambda i: self._busy[i], default=None)  # the least busy, so load spreads
