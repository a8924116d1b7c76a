"""Issue 14: a world that outgrows the context keeps costing only its new tokens.

The oldest turns go in chunks (so the prompts that follow extend one another), and attention models shift
their state over the dropped span instead of re-reading the history. A bounded history window
(`--history-tokens`, issue 30) drops them the same way before the context is full, so a long session's calls
cost what its early ones do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.engines.llama.kv import shift_plan
from mcp_sim.rehearsal.sources import options_digest
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

OPS = SPECS / "ops.yaml"
SERVICES = ("api", "web", "worker", "scheduler", "postgres")


def test_shift_plan_finds_the_span_left_out_after_the_shared_prefix() -> None:
    system, dropped, kept = list(range(100)), list(range(500, 540)), list(range(900, 960))
    assert shift_plan(system + dropped + kept + [7, 7], system + kept + [8]) == (100, 40, 60)


def test_shift_plan_declines_what_is_no_dropped_span() -> None:
    system = list(range(100))
    assert shift_plan([*system, 1, 2, 3], [*system, 1, 2, 3, 4]) is None  # a plain extension
    assert shift_plan(system + list(range(500, 600)), system + list(range(700, 800))) is None  # no overlap
    assert shift_plan(system + list(range(500, 540)) + [5] * 8, system + [5] * 8 + [6]) is None  # too short


# Every restart asks the model (its state, pid and time are written anew each time); a status read of a
# service already shown is answered from the world's live state instead.
def test_turns_are_dropped_in_chunks_so_the_following_prompts_extend_each_other() -> None:
    answer = '{"service": "api", "state": "running", "pid": 2, "restarted_at": "2025-06-01T12:00:00Z"}'
    engine = ScriptedEngine(*[answer] * 30, context_size=2000)
    simulator = Simulator(load_catalog([OPS]), engine, SimOptions(max_tokens=64, attempts=1))
    dropped = [simulator.simulate("restart_service", {"service": SERVICES[i % 5]}, world="w")
               .meta[META_KEY]["dropped_turns"] for i in range(30)]
    drops = [count for count in dropped if count]
    assert drops and min(drops) >= 2, dropped  # a quarter of the history's room at a time, not one turn
    first = dropped.index(drops[0])
    assert dropped[first + 1] == 0  # the next call extends the trimmed prompt


def test_a_world_past_its_context_answers_with_few_evaluated_tokens(model_path: Path) -> None:
    engine = LlamaEngine(model_path, n_ctx=2048, n_threads=2)
    simulator = Simulator(load_catalog([OPS]), engine, SimOptions(temperature=0.0, max_tokens=96, attempts=1))
    metas = []
    for index in range(9):
        result = simulator.simulate("restart_service", {"service": SERVICES[index % 5]}, world="w")
        assert not result.is_error, result.text
        assert result.structured is not None and result.structured["service"]
        metas.append(result.meta[META_KEY])
    after_drops = [meta for meta in metas if meta["dropped_turns"]]
    assert after_drops, [meta["prompt_tokens"] for meta in metas]
    # Without the shift each of these re-reads the whole kept history (200+ tokens here).
    assert all(meta["evaluated_tokens"] < 64 for meta in after_drops), after_drops
    engine.close()


def test_a_history_window_keeps_every_prompt_within_its_tokens() -> None:
    answer = '{"service": "api", "state": "running", "pid": 2, "restarted_at": "2025-06-01T12:00:00Z"}'
    sizes = {}
    for window in (0, 300):
        engine = ScriptedEngine(*[answer] * 30)  # a context far larger than any of these prompts
        simulator = Simulator(load_catalog([OPS]), engine, SimOptions(max_tokens=64, attempts=1,
                                                                      history_tokens=window))
        dropped = [simulator.simulate("restart_service", {"service": SERVICES[i % 5]}, world="w")
                   .meta[META_KEY]["dropped_turns"] for i in range(30)]
        sizes[window] = [engine.count_tokens(request.messages) for request in engine.requests]
        assert bool(any(dropped)) == bool(window), dropped
    bare = sizes[300][0]  # the first call has no history
    assert max(sizes[300]) <= bare + 300 < max(sizes[0]), (sizes[300], sizes[0])
    # Turns go in chunks, as when the context is full, so later prompts settle well above the bare prompt.
    assert min(sizes[300][10:]) > bare + 150, sizes[300]


def test_the_window_left_unset_keeps_the_cache_keys_recorded_before_it() -> None:
    fields = [(f.name, f.type, f) for f in dataclasses.fields(SimOptions) if f.name != "history_tokens"]
    before = dataclasses.make_dataclass("SimOptionsBefore", fields)()
    assert options_digest(SimOptions(), 4096) == options_digest(before, 4096)
    assert options_digest(SimOptions(history_tokens=512), 4096) != options_digest(SimOptions(), 4096)


def test_a_long_session_in_a_history_window_costs_its_new_tokens(model_path: Path) -> None:
    engine = LlamaEngine(model_path, n_ctx=8192, n_threads=2)
    simulator = Simulator(load_catalog([OPS]), engine, SimOptions(temperature=0.0, max_tokens=96, attempts=1,
                                                                  history_tokens=200))
    metas = []
    for index in range(8):
        result = simulator.simulate("restart_service", {"service": SERVICES[index % 5]}, world="w")
        assert not result.is_error, result.text
        metas.append(result.meta[META_KEY])
    prompts = [meta["prompt_tokens"] for meta in metas]
    assert any(meta["dropped_turns"] for meta in metas), prompts
    assert max(prompts) <= prompts[0] + 200 + 40, prompts  # the window, plus this call's own line
    # The dropped span is shifted out of the model's state, not re-read with the kept turns.
    assert all(meta["evaluated_tokens"] < 64 for meta in metas[1:] if meta["dropped_turns"]), metas
    engine.close()
