"""Regression (issue 8): a call must be answered from its own prompt, never from logits another session left.

When a new prompt was wholly a prefix of the live model state (a second session starting with the call the
first one started with), the engine trimmed the state to the whole prompt, evaluated nothing, and
llama-cpp-python sampled the first token from the logits of the other session's last answer token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS, subprocess_env

OPS = SPECS / "ops.yaml"
GREEDY = SimOptions(temperature=0.0, max_tokens=96, attempts=1)
# The issue's recipe: session `first` makes these seven calls, then session `second` repeats the first one.
FIRST_SESSION = [
    ("tail_logs", {"service": "worker"}), ("get_service_status", {"service": "worker"}),
    ("restart_service", {"service": "worker"}), ("get_service_status", {"service": "worker"}),
    ("tail_logs", {"service": "api"}), ("drop_cache", {"cache": "redis"}), ("tail_logs", {"service": "worker"}),
]
REPEATED = FIRST_SESSION[0]


def greedy_simulator(model_path: Path) -> Simulator:
    return Simulator(load_catalog([OPS]), LlamaEngine(model_path, n_ctx=4096, n_threads=2), GREEDY)


@pytest.fixture(scope="module")
def fresh_answer(model_path: Path) -> str:
    """The repeated call answered by a fresh engine, first thing: the reference."""
    result = greedy_simulator(model_path).simulate(*REPEATED, world="fresh")
    assert not result.is_error, result.text
    return result.text


def test_a_second_session_after_a_long_first_one_answers_as_a_fresh_process(model_path: Path,
                                                                             fresh_answer: str) -> None:
    simulator = greedy_simulator(model_path)
    for name, arguments in FIRST_SESSION:
        simulator.simulate(name, arguments, world="first")
    second = simulator.simulate(*REPEATED, world="second")
    third = simulator.simulate(*REPEATED, world="third")
    for result in (second, third):
        assert not result.is_error, result.text
        assert result.meta[META_KEY]["completion_tokens"] > 3
        assert result.text == fresh_answer
    # The prompt's last token is always evaluated anew: that is where the first token's logits come from.
    assert second.meta[META_KEY]["evaluated_tokens"] >= 1


def test_a_session_resumed_from_a_snapshot_answers_as_it_would_alone(model_path: Path) -> None:
    alone = greedy_simulator(model_path)
    interleaved = greedy_simulator(model_path)
    follow_up = ("get_service_status", {"service": "worker"})
    alone.simulate(*REPEATED, world="a")
    expected = alone.simulate(*follow_up, world="a")
    interleaved.simulate(*REPEATED, world="a")
    interleaved.simulate(*FIRST_SESSION[4], world="b")  # parks a's state in the snapshot cache
    resumed = interleaved.simulate(*follow_up, world="a")  # restores it
    assert not resumed.is_error, resumed.text
    assert resumed.text == expected.text
    assert resumed.meta[META_KEY]["evaluated_tokens"] < resumed.meta[META_KEY]["prompt_tokens"] / 3


def test_an_empty_text_answer_does_not_blame_an_output_schema() -> None:
    from tests.scripted import ScriptedEngine

    simulator = Simulator(load_catalog([OPS]), ScriptedEngine("", "", ""), SimOptions(attempts=3))
    result = simulator.simulate("tail_logs", {"service": "worker"})
    assert result.is_error
    assert "outputSchema" not in result.text
    assert "empty answer" in result.text


@pytest.mark.anyio
async def test_the_issue_recipe_over_stdio(fresh_answer: str) -> None:
    params = StdioServerParameters(
        command=sys.executable, env=subprocess_env(),
        args=["-m", "mcp_sim", "serve", str(OPS), "--temperature", "0", "--max-tokens", "96", "--attempts", "1",
              "--ctx", "4096", "--threads", "2"])
    async with Client(params, read_timeout_seconds=300) as client:
        for name, arguments in FIRST_SESSION:
            await client.call_tool(name, arguments, meta={"mcp-sim/session": "first"})
        second = await client.call_tool(*REPEATED, meta={"mcp-sim/session": "second"})
    assert not second.is_error, second.content
    assert second.content[0].text == fresh_answer  # type: ignore[union-attr]
