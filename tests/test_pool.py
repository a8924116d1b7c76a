"""`--parallel N` with `--slots M`: N model instances, each decoding up to M calls at once, N x M in all."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from mcp_sim.core.prompt import build_messages
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.base import ChatMessage, Generation, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.pool import EnginePool
from tests.conftest import SPECS


class GatedEngine:
    """A real Engine whose generate() holds each call until the test opens the gate; counts calls inside."""

    name = "gated"
    context_size = 4096

    def __init__(self, capacity: int, inside: list[str], lock: threading.Lock, gate: threading.Event):
        self.capacity = capacity
        self.inside, self.lock, self.gate = inside, lock, gate
        self.served: list[str | None] = []

    def load(self) -> None:
        pass

    def close(self) -> None:
        pass

    def count_tokens(self, messages: list[ChatMessage]) -> int:
        return 1

    def schema_support(self, json_schema: dict[str, Any]) -> str | None:
        return None

    def generate(self, request: GenerationRequest) -> Generation:
        with self.lock:
            self.inside.append(str(request.cache_key))
            self.served.append(request.cache_key)
        self.gate.wait(30)
        with self.lock:
            self.inside.remove(str(request.cache_key))
        return Generation("ok", 1, 1, "stop")


def gated_pool(instances: int, capacity: int) -> tuple[EnginePool, list[GatedEngine], list[str], threading.Event]:
    inside: list[str] = []
    lock, gate = threading.Lock(), threading.Event()
    engines = [GatedEngine(capacity, inside, lock, gate) for _ in range(instances)]
    return EnginePool(engines), engines, inside, gate


def request(key: str) -> GenerationRequest:
    return GenerationRequest([ChatMessage("user", key)], max_tokens=4, cache_key=key)


def in_threads(pool: EnginePool, requests: list[GenerationRequest]) -> list[threading.Thread]:
    threads = [threading.Thread(target=pool.generate, args=(r,), daemon=True) for r in requests]
    for thread in threads:
        thread.start()
    return threads


def wait_until(condition: Any, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_pool_fills_every_instance_to_its_capacity() -> None:
    pool, _, inside, gate = gated_pool(instances=2, capacity=3)
    threads = in_threads(pool, [request(f"w{n}") for n in range(7)])
    wait_until(lambda: len(inside) == 6)  # 2 x 3 at once, not one call per instance
    time.sleep(0.2)
    assert len(inside) == 6  # the seventh waits for room
    gate.set()
    for thread in threads:
        thread.join(10)
    assert pool.capacity == 6


def test_a_call_waiting_for_room_stops_when_cancelled() -> None:
    pool, engines, inside, gate = gated_pool(instances=1, capacity=1)
    threads = in_threads(pool, [request("busy")])
    wait_until(lambda: inside == ["busy"])
    waiting = request("waiting")
    results: list[Generation] = []
    waiter = threading.Thread(target=lambda: results.append(pool.generate(waiting)), daemon=True)
    waiter.start()
    time.sleep(0.2)
    waiting.cancel.set()
    waiter.join(5)
    assert not waiter.is_alive()  # it stopped waiting while the instance was still busy
    assert results[0].finish_reason == "cancelled"
    assert engines[0].served == ["busy"]  # the cancelled call never reached the engine
    gate.set()
    threads[0].join(10)


def test_a_conversation_goes_back_to_the_instance_that_holds_its_state() -> None:
    pool, engines, inside, gate = gated_pool(instances=2, capacity=2)
    gate.set()
    pool.generate(request("a"))
    home = next(i for i, engine in enumerate(engines) if engine.served == ["a"])
    gate.clear()
    threads = in_threads(pool, [request("b")])  # the least busy instance first: `a`'s own
    wait_until(lambda: inside == ["b"])
    threads += in_threads(pool, [request("a")])  # `a`'s instance is busier now, but has room and its state
    wait_until(lambda: len(inside) == 2)
    assert engines[home].served[-1] == "a"
    forked = GenerationRequest([ChatMessage("user", "f")], max_tokens=4, cache_key="fork-of-a",
                               related_cache_keys=["a"])
    threads += in_threads(pool, [forked])  # `a`'s instance is full now: the fork goes to the other
    wait_until(lambda: len(inside) == 3)
    assert engines[1 - home].served[-1] == "fork-of-a"
    gate.set()
    for thread in threads:
        thread.join(10)


def test_parallel_times_slots_calls_decode_at_once(model_path: Path) -> None:
    # --parallel 2 --slots 2, one thread per instance: four calls of four worlds decode together.
    pool = EnginePool([LlamaEngine(model_path, n_ctx=4096, n_threads=1, slots=2) for _ in range(2)])
    pool.load()
    catalog = load_catalog([SPECS / "weather.yaml"])
    simulator = Simulator(catalog, pool, SimOptions(max_tokens=96))
    # The shared system prompt is read first, as the server's warm-up does: the calls then differ by a short
    # tail, so they start answering together instead of queueing behind each other's prompt reading.
    system = simulator.system_prompt(catalog.spec_sets[0], simulator.worlds.default_scenario)
    pool.warm([build_messages(system, [], "", simulator.options.prompt_style)[:1]])
    cities = {"north": "Oslo", "south": "Lima", "east": "Tokyo", "west": "Denver"}
    token_times: dict[str, list[float]] = {world: [] for world in cities}
    results = {}
    start = threading.Barrier(len(cities))

    def call(world: str) -> None:
        def on_progress(tokens: int, budget: int) -> None:
            token_times[world].append(time.monotonic())

        start.wait()
        results[world] = simulator.simulate("get_weather", {"city": cities[world]}, world=world,
                                            on_progress=on_progress)

    threads = [threading.Thread(target=call, args=(world,)) for world in cities]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    pool.close()
    schema = catalog.tools["get_weather"].output_schema
    assert schema is not None
    for result in results.values():
        assert not result.is_error, result.text
        assert validation_error(result.structured, schema) is None
    assert {r.meta[META_KEY]["world"] for r in results.values()} == set(cities)
    # The peak number of calls decoding at one moment (between a call's first and last token): all four.
    # A pool that holds an instance for a whole call would reach two.
    spans = [(times[0], times[-1]) for times in token_times.values()]
    assert all(token_times.values())
    peak = max(sum(first <= moment <= last for first, last in spans) for moment, _ in spans)
    assert peak == len(cities), f"at most {peak} calls decoded at once: {spans}"
