"""Several instances of one engine answering calls side by side (`--parallel N`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from mcp_sim.engines.base import ChatMessage, Engine, Generation, GenerationRequest
from mcp_sim.engines.counting import count_text
from mcp_sim.engines.readiness import check_engine, warm_engine

# Conversations remembered for routing; older ones are simply routed to any idle instance.
MAX_AFFINITIES = 4096


class EnginePool:
    """Hands each call to an idle instance, preferring the one that served its conversation last:
    that instance still holds the conversation's model state, so the call resumes instead of re-reading."""

    def __init__(self, engines: Sequence[Engine]):
        if not engines:
            raise ValueError("an engine pool needs at least one engine")
        self.engines = list(engines)
        self.name = engines[0].name
        self._idle = set(range(len(engines)))
        self._affinity: OrderedDict[str, int] = OrderedDict()
        self._ready = threading.Condition()

    @property
    def context_size(self) -> int:
        return self.engines[0].context_size

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
        index = self._acquire(request.cache_key)
        try:
            return self.engines[index].generate(request)
        finally:
            with self._ready:
                if request.cache_key is not None:
                    self._affinity[request.cache_key] = index
                    self._affinity.move_to_end(request.cache_key)
                    if len(self._affinity) > MAX_AFFINITIES:
                        self._affinity.popitem(last=False)
                self._idle.add(index)
                self._ready.notify()

    def _acquire(self, cache_key: str | None) -> int:
        with self._ready:
            while not self._idle:
                self._ready.wait()
            preferred = self._affinity.get(cache_key) if cache_key is not None else None
            index = preferred if preferred in self._idle else min(self._idle)
            self._idle.remove(index)
            return index
