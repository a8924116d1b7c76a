"""`--parallel N`: several model instances answer calls of different worlds side by side."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.pool import EnginePool
from mcp_sim.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.specs import load_catalog, validation_error
from tests.conftest import SPECS


def test_two_instances_answer_two_sessions_at_the_same_time(model_path: Path) -> None:
    # One thread per instance: the two decode at once on this 2-core machine.
    pool = EnginePool([LlamaEngine(model_path, n_ctx=4096, n_threads=1) for _ in range(2)])
    pool.load()
    catalog = load_catalog([SPECS / "weather.yaml"])
    simulator = Simulator(catalog, pool, SimOptions(max_tokens=96))
    token_times: dict[str, list[float]] = {"north": [], "south": []}
    results = {}

    def call(session: str, city: str) -> None:
        def on_progress(tokens: int, budget: int) -> None:
            token_times[session].append(time.monotonic())

        results[session] = simulator.simulate("get_weather", {"city": city}, world=session,
                                              on_progress=on_progress)

    threads = [threading.Thread(target=call, args=args) for args in (("north", "Oslo"), ("south", "Lima"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    schema = catalog.tools["get_weather"].output_schema
    assert schema is not None
    for result in results.values():
        assert not result.is_error, result.text
        assert validation_error(result.structured, schema) is None
    # The two decodes overlapped: each session produced tokens while the other was still producing.
    north, south = token_times["north"], token_times["south"]
    assert north and south
    assert max(north[0], south[0]) < min(north[-1], south[-1])
    # And each ran on its own instance, which now holds that session's state.
    assert {r.meta[META_KEY]["world"] for r in results.values()} == {"north", "south"}
    pool.close()
