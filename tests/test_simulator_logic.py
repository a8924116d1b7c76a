"""Simulator logic with a scripted engine: validation, retries, sessions, context trimming, metadata."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator, UnknownToolError
from mcp_sim.core.specs import Catalog, load_catalog
from mcp_sim.engines.base import ChatMessage
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

WEATHER_OK = json.dumps({"city": "Oslo", "temperature": 4.5, "conditions": "cloudy", "units": "metric"})


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog([SPECS])


def simulator(catalog: Catalog, *answers: str | tuple[str, str], **options: object) -> tuple[Simulator, ScriptedEngine]:
    engine = ScriptedEngine(*answers)
    return Simulator(catalog, engine, SimOptions(**options)), engine  # type: ignore[arg-type]


def test_valid_answer_becomes_structured_content_and_text(catalog: Catalog) -> None:
    sim, _ = simulator(catalog, WEATHER_OK)
    result = sim.simulate("get_weather", {"city": "Oslo"})
    assert not result.is_error
    assert result.structured == json.loads(WEATHER_OK)
    assert json.loads(result.text) == result.structured
    meta = result.meta[META_KEY]
    assert meta["simulated"] is True and meta["model"] == "scripted" and meta["attempts"] == 1


def test_arguments_that_break_the_schema_are_an_error_result_and_never_reach_the_model(catalog: Catalog) -> None:
    sim, engine = simulator(catalog)
    result = sim.simulate("get_weather", {"city": 5})
    assert result.is_error
    assert "Input validation error for tool 'get_weather'" in result.text and "5 is not of type 'string'" in result.text
    missing = sim.simulate("get_weather", {})
    assert missing.is_error and "'city' is a required property" in missing.text
    assert engine.requests == []


def test_oversized_arguments_are_refused_with_the_limit(catalog: Catalog) -> None:
    sim, engine = simulator(catalog, max_argument_bytes=100)
    result = sim.simulate("write_file", {"path": "/big.txt", "content": "x" * 500})
    assert result.is_error and "at most 100" in result.text and "--max-argument-bytes" in result.text
    assert engine.requests == []


def test_unknown_tool_raises_naming_the_known_tools(catalog: Catalog) -> None:
    sim, _ = simulator(catalog)
    with pytest.raises(UnknownToolError, match=r"Unknown tool 'nope'.*get_weather"):
        sim.simulate("nope", {})


def test_schema_breaking_answers_are_retried_then_reported(catalog: Catalog) -> None:
    sim, engine = simulator(catalog, "not json", json.dumps({"city": "Oslo"}), WEATHER_OK, seed=7)
    result = sim.simulate("get_weather", {"city": "Oslo"})
    assert not result.is_error and result.meta[META_KEY]["attempts"] == 3
    # Each retry samples differently.
    assert [r.seed for r in engine.requests] == [7, 8, 9]
    assert engine.requests[1].temperature > engine.requests[0].temperature

    sim, _ = simulator(catalog, "nope", "[1]", json.dumps({"city": "Oslo"}))
    failed = sim.simulate("get_weather", {"city": "Oslo"})
    assert failed.is_error and failed.structured is None
    assert "did not fit the tool's outputSchema after 3 attempt(s)" in failed.text
    assert "'temperature' is a required property" in failed.text


def test_a_truncated_answer_is_a_failed_attempt(catalog: Catalog) -> None:
    sim, _ = simulator(catalog, (WEATHER_OK[:20], "length"), WEATHER_OK)
    result = sim.simulate("get_weather", {"city": "Oslo"})
    assert not result.is_error and result.meta[META_KEY]["attempts"] == 2


def test_values_the_grammar_cannot_check_are_checked_after_decoding(catalog: Catalog) -> None:
    # C-1009 is not in the world's data: the model writes the whole customer.
    bad_email = {"found": True, "customer": {"id": "C-1009", "name": "Ann", "email": "not-an-email",
                                             "phone": None, "plan": "pro", "since": "2024-01-01T00:00:00Z"}}
    sim, _ = simulator(catalog, json.dumps(bad_email), attempts=1)
    result = sim.simulate("get_customer", {"customer_id": "C-1009"})
    assert result.is_error and "is not a 'email'" in result.text


def test_reasoning_and_wrappers_are_stripped(catalog: Catalog) -> None:
    wrapped = f"<think>the user wants Oslo</think><predicted_observation>{WEATHER_OK}</predicted_observation>"
    sim, _ = simulator(catalog, wrapped)
    result = sim.simulate("get_weather", {"city": "Oslo"})
    assert result.structured == json.loads(WEATHER_OK) and "think" not in result.text


def test_text_tools_answer_plain_text_without_a_grammar(catalog: Catalog) -> None:
    sim, engine = simulator(catalog, "12:00 api INFO started\n12:01 api INFO ready")
    result = sim.simulate("tail_logs", {"service": "api", "lines": 2})
    assert not result.is_error and result.structured is None and "ready" in result.text
    assert engine.requests[0].json_schema is None


def test_call_n_sees_calls_1_to_n_minus_1_of_its_session_only(catalog: Catalog) -> None:
    answers = [json.dumps({"path": f"/f{i}", "size": 1, "created": True}) for i in range(4)]
    sim, engine = simulator(catalog, *answers)
    sim.simulate("write_file", {"path": "/a-1", "content": "A1"}, world="A")
    sim.simulate("write_file", {"path": "/b-1", "content": "B1"}, world="B")
    sim.simulate("write_file", {"path": "/a-2", "content": "A2"}, world="A")
    sim.simulate("write_file", {"path": "/a-3", "content": "A3"}, world="A")
    last = engine.requests[-1].messages
    prompt = "\n".join(m.content for m in last[1:])
    assert [m.role for m in last] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "/a-1" in last[1].content and "/a-2" in last[3].content and "/a-3" in last[5].content
    assert '"size": 1' in last[2].content  # the observation given for call 1 (its path pinned by the state)
    assert "/b-1" not in prompt


def test_histories_are_kept_per_world(catalog: Catalog) -> None:
    sim, engine = simulator(catalog, WEATHER_OK, json.dumps({"path": "/x", "size": 1, "created": True}))
    sim.simulate("get_weather", {"city": "Oslo"}, world="S")
    sim.simulate("write_file", {"path": "/x", "content": "x"}, world="S")
    files_prompt = engine.requests[-1].messages
    assert len(files_prompt) == 2 and "Oslo" not in files_prompt[1].content
    assert "write_file" in files_prompt[0].content and "get_weather" not in files_prompt[0].content


def test_oldest_turns_are_dropped_to_fit_the_context_never_the_system(catalog: Catalog,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    answer = json.dumps({"path": "/p", "size": 1, "created": True})
    sim, engine = simulator(catalog, *[answer] * 12, max_tokens=100)
    tool = catalog.tools["write_file"]
    assert tool.spec_set is not None
    system_tokens = engine.count_tokens([ChatMessage("system", sim.system_prompt(tool.spec_set, "default"))])
    engine._context_size = system_tokens + 100 + 200  # room for the system prompt and a few turns
    with caplog.at_level(logging.WARNING):
        for index in range(12):
            sim.simulate("write_file", {"path": f"/turn-{index}", "content": "z" * 40}, world="T")
    last = engine.requests[-1].messages
    assert last[0].role == "system" and "write_file" in last[0].content
    assert "/turn-11" in last[-1].content and "/turn-0\"" not in "".join(m.content for m in last)
    assert engine.count_tokens(last) <= engine.context_size - 100
    assert "left the" in caplog.text and "oldest turn" in caplog.text
    world = sim.worlds.get("T")
    assert world.all_turns() == 12  # the history keeps every call; only prompts leave the oldest out
    assert sum(world.dropped.values()) == 11 - (len(last) - 2) // 2  # the last prompt held the rest


def test_progress_counts_tokens_against_the_budget(catalog: Catalog) -> None:
    sim, _ = simulator(catalog, "a b c d e", max_tokens=50, attempts=2)
    seen: list[tuple[int, int]] = []
    sim.simulate("tail_logs", {"service": "api", "lines": 1}, on_progress=lambda n, total: seen.append((n, total)))
    assert seen[-1] == (5, 100)


def test_cancelled_generation_is_reported_and_not_recorded(catalog: Catalog) -> None:
    sim, _ = simulator(catalog, ("partial", "cancelled"))
    cancel = threading.Event()
    result = sim.simulate("tail_logs", {"service": "api", "lines": 1}, world="C", cancel=cancel)
    assert result.is_error and "cancelled" in result.text
    assert sim.worlds.get("C").history(catalog.tools["tail_logs"].source) == []


def test_worlds_are_evicted_least_recently_used(caplog: pytest.LogCaptureFixture) -> None:
    from mcp_sim.core.worlds import Worlds

    worlds = Worlds(max_worlds=2)
    with caplog.at_level(logging.WARNING):
        worlds.get("a"), worlds.get("b"), worlds.get("a"), worlds.get("c")
    assert worlds.names() == ["a", "c"]
    assert "dropped the least recently used one, 'b'" in caplog.text
