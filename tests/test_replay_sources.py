"""Answers before the model, with a scripted engine: fixtures, cassettes and the cache in that order; the
cache's bytes and keys; --replay-only and --strict misses; bad cache files at startup."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mcp_sim.app import assemble
from mcp_sim.cli import cli
from mcp_sim.core import prompt
from mcp_sim.core.simulator import META_KEY, SimOptions, SimulationResult, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.cache import ResponseCache
from mcp_sim.rehearsal.replay_setup import REPLAY_ENGINE_NAME
from mcp_sim.rehearsal.setup import RehearsalSettings
from mcp_sim.rehearsal.sources import result_bytes
from mcp_sim.serving.server import to_call_tool_result
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

TRACES = SPECS / "traces"
TIME_TRACE = TRACES / "time.jsonl"
FIXTURES = [
    {"match": {"timezone": "UTC"},
     "result": {"timezone": "{{arguments.timezone}}", "datetime": "2030-01-01T00:00:00+00:00",
                "day_of_week": "Tuesday", "is_dst": False}},
    {"match": {"schema": {"properties": {"timezone": {"pattern": "^Antarctica/"}}, "required": ["timezone"]}},
     "result": {"timezone": "{{arguments.timezone}}", "datetime": "{{now}}", "day_of_week": "{{uuid}}",
                "is_dst": False}},
]


def weather(city: str) -> str:
    return json.dumps({"city": city, "temperature": 4.5, "conditions": "cloudy", "units": "metric"})


def answer_json(timezone: str, hour: int = 12) -> str:
    return json.dumps({"timezone": timezone, "datetime": f"2026-11-30T{hour:02}:00:00+00:00",
                       "day_of_week": "Monday", "is_dst": False})


@pytest.fixture
def time_spec(tmp_path: Path) -> Path:
    """The mirrored time server's spec with fixtures for get_current_time."""
    document = yaml.safe_load((TRACES / "time.yaml").read_text())
    document["tools"][0]["x-sim"]["fixtures"] = FIXTURES
    path = tmp_path / "time.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def simulator(spec: Path, *answers: str, engine: ScriptedEngine | None = None, options: SimOptions | None = None,
              **settings: Any) -> tuple[Simulator, ScriptedEngine]:
    engine = engine or ScriptedEngine(*answers)
    return assemble(load_catalog([spec]), engine, options, rehearsal=RehearsalSettings(**settings)), engine


def meta(result: SimulationResult) -> dict[str, Any]:
    return dict(result.meta[META_KEY])


def client_view(result: SimulationResult) -> str:
    """The result as the client receives it, less the per-call _meta."""
    return to_call_tool_result(result).model_dump_json(by_alias=True, exclude_none=True, exclude={"meta"})


def test_fixture_then_cassette_then_cache_then_model_answer(time_spec: Path, tmp_path: Path) -> None:
    cache = tmp_path / "c.db"
    recorder, _ = simulator(time_spec, answer_json("Europe/Paris"), answer_json("Asia/Tokyo", 9), cache=cache)
    for timezone in ("Europe/Paris", "Asia/Tokyo", "UTC"):
        recorder.simulate("get_current_time", {"timezone": timezone}, "w")
    # A fresh server with the real trace too: every call below could be answered by a later source as well.
    sim, engine = simulator(time_spec, answer_json("America/Denver", 5), cache=cache, replay=[TIME_TRACE])
    paris = sim.simulate("get_current_time", {"timezone": "Europe/Paris"}, "w")
    tokyo = sim.simulate("get_current_time", {"timezone": "Asia/Tokyo"}, "w")  # cached too, but recorded
    utc = sim.simulate("get_current_time", {"timezone": "UTC"}, "w")  # recorded too, but pinned
    denver = sim.simulate("get_current_time", {"timezone": "America/Denver"}, "w")
    assert [meta(r)["source"] for r in (paris, tokyo, utc, denver)] == ["cache", "cassette", "fixture", "model"]
    assert paris.structured == json.loads(answer_json("Europe/Paris"))
    assert tokyo.structured is not None and tokyo.structured["datetime"] == "2026-11-30T10:41:38+09:00"
    assert meta(tokyo)["cassette"].startswith(f"{TIME_TRACE}:2 ")
    assert utc.structured == {"timezone": "UTC", "datetime": "2030-01-01T00:00:00+00:00", "day_of_week": "Tuesday",
                              "is_dst": False}
    assert meta(utc)["fixture"].endswith("/x-sim/fixtures/0")
    # The model was asked once, and saw every earlier answer, whatever gave it, in the world's history.
    assert len(engine.requests) == 1
    prompt_text = "\n".join(m.content for m in engine.requests[0].messages)
    for earlier in (paris, tokyo, utc):
        assert json.dumps(earlier.structured, ensure_ascii=False) in prompt_text


def test_fixture_templates_are_filled_per_call_through_the_simulator(time_spec: Path) -> None:
    sim, engine = simulator(time_spec)
    first = sim.simulate("get_current_time", {"timezone": "Antarctica/Troll"}, "w")
    second = sim.simulate("get_current_time", {"timezone": "Antarctica/Casey"}, "w")
    again, _ = simulator(time_spec)
    replayed = again.simulate("get_current_time", {"timezone": "Antarctica/Troll"}, "w")
    assert engine.requests == []
    assert first.structured is not None and second.structured is not None and replayed.structured is not None
    assert (first.structured["timezone"], second.structured["timezone"]) == ("Antarctica/Troll", "Antarctica/Casey")
    assert first.structured["datetime"].endswith("+00:00")  # {{now}}: the time of the call, in UTC
    # {{uuid}}: one per call, the same for the same seed, world and call number.
    assert first.structured["day_of_week"] != second.structured["day_of_week"]
    assert replayed.structured["day_of_week"] == first.structured["day_of_week"]
    assert meta(first)["source"] == "fixture" and meta(first)["fixture"].endswith("/x-sim/fixtures/1")


def test_a_cassette_plays_identical_calls_in_order_per_world_and_from_the_start_after_a_reset() -> None:
    spec = TRACES / "filesystem.yaml"
    notes = {"path": "/sandbox/notes.txt"}
    sim, engine = simulator(spec, "a model answer", replay=[TRACES / "filesystem.jsonl"], replay_only=True)
    first, second, third = (sim.simulate("read_text_file", notes, "w") for _ in range(3))
    assert "beta" in first.text and "gamma" in second.text
    # The recording holds two reads; the third is the file as the world last saw it, still without a model.
    assert meta(third)["source"] == "state" and third.structured == second.structured
    unseen = sim.simulate("read_text_file", {"path": "/sandbox/never.txt"}, "w")
    assert meta(unseen)["source"] == "miss" and unseen.is_error  # strict replay fails loudly on the rest
    assert meta(sim.simulate("read_text_file", notes, "other"))["source"] == "cassette"  # worlds are apart
    sim.worlds.reset("w")
    assert sim.simulate("read_text_file", notes, "w").text == first.text
    fork = sim.worlds.fork("w", "w2")
    assert sim.simulate("read_text_file", notes, fork.name).text == second.text  # the fork continues
    assert engine.requests == []


def test_a_hit_returns_the_stored_bytes_and_the_client_sees_what_the_model_answered(tmp_path: Path) -> None:
    cache = tmp_path / "c.db"
    spec = SPECS / "weather.yaml"
    # Raw unicode and a float that JSON writes back the same way.
    answer = json.dumps({"city": "Zürich", "temperature": -0.5, "conditions": "snow", "units": "metric"},
                        ensure_ascii=False)
    recorder, _ = simulator(spec, answer, cache=cache)
    recorded = recorder.simulate("get_weather", {"city": "Zürich"}, "a")
    sim, engine = simulator(spec, cache=cache, replay_only=True)
    hit = sim.simulate("get_weather", {"city": "Zürich"}, "b")  # another world: the key is the world's history
    with ResponseCache(cache) as opened:
        stored = opened.export(tmp_path / "out.jsonl")
    row = json.loads((tmp_path / "out.jsonl").read_text())
    assert stored == 1 and engine.requests == []
    assert (meta(recorded)["source"], meta(hit)["source"]) == ("model", "cache")
    assert client_view(hit) == client_view(recorded)
    assert result_bytes(hit) == result_bytes(recorded)
    assert json.loads(result_bytes(recorded)) == row["result"]
    assert "latency_ms" not in row["result"] and "_meta" not in row["result"]
    assert sim.worlds.export(sim.worlds.existing("b"))["history"] == \
        recorder.worlds.export(recorder.worlds.existing("a"))["history"]


def test_only_the_models_own_answers_are_cached(tmp_path: Path) -> None:
    cache = tmp_path / "c.db"
    spec = SPECS / "weather.yaml"
    sim, _ = simulator(spec, "not json", "not json", "not json", cache=cache, options=SimOptions(attempts=3))
    assert meta(sim.simulate("get_weather", {"city": "Oslo"}))["stage"] == "output"  # never fit
    cancel = threading.Event()
    cancel.set()
    sim.model.engine = ScriptedEngine(("{", "cancelled"))
    assert sim.simulate("get_weather", {"city": "Rome"}, cancel=cancel).is_error
    sim.model.engine = ScriptedEngine(json.dumps({"city": "Faulted", "temperature": 1, "conditions": "fog",
                                                  "units": "metric"}))
    sim.faults = MarkedFault()
    assert not sim.simulate("get_weather", {"city": "Faulted"}).is_error
    with ResponseCache(cache) as opened:
        assert opened.stats()["entries"] == 0


class MarkedFault:
    """A fault hook that lets the model answer, then marks the answer as changed."""

    def before(self, call: object) -> None:
        return None

    def after(self, call: object, result: SimulationResult) -> SimulationResult:
        result.simulation.faults.append({"kind": "latency"})
        return result


def test_a_simulated_tool_failure_is_cached_and_replayed_into_the_history(tmp_path: Path) -> None:
    cache = tmp_path / "c.db"
    spec = SPECS / "weather.yaml"
    options = SimOptions(simulate_errors=True)
    recorder, _ = simulator(spec, json.dumps({"error": "unknown city"}), cache=cache, options=options)
    failed = recorder.simulate("get_weather", {"city": "Atlantis"}, "a")
    sim, _ = simulator(spec, cache=cache, replay_only=True, options=options)
    replayed = sim.simulate("get_weather", {"city": "Atlantis"}, "b")
    assert failed.is_error and replayed.is_error and replayed.text == failed.text == "unknown city"
    assert meta(replayed)["simulated_error"] is True
    assert sim.worlds.existing("b").turns == recorder.worlds.existing("a").turns


@pytest.mark.parametrize(("recorded", "replayed", "hits"), [
    ({"expose_prompt": True}, {}, True),  # debugging output does not change an answer
    ({}, {"max_tokens": 100}, False),
    ({}, {"seed": 1}, False),
    ({}, {"temperature": 0.7}, False),
    ({}, {"prompt_style": "agentworld"}, False),
])
def test_options_that_change_an_answer_change_the_key(tmp_path: Path, recorded: dict[str, Any],
                                                      replayed: dict[str, Any], hits: bool) -> None:
    cache = tmp_path / "c.db"
    recorder, _ = simulator(SPECS / "weather.yaml", weather("Oslo"), cache=cache, options=SimOptions(**recorded))
    assert meta(recorder.simulate("get_weather", {"city": "Oslo"}))["source"] == "model"
    sim, _ = simulator(SPECS / "weather.yaml", cache=cache, replay_only=True, options=SimOptions(**replayed))
    assert (meta(sim.simulate("get_weather", {"city": "Oslo"}))["source"] == "cache") is hits


def test_the_history_and_the_context_size_are_part_of_the_key(tmp_path: Path) -> None:
    cache = tmp_path / "c.db"
    spec = SPECS / "weather.yaml"
    recorder, _ = simulator(spec, weather("Oslo"), weather("Rome"), cache=cache)
    recorder.simulate("get_weather", {"city": "Oslo"}, "w")
    recorder.simulate("get_weather", {"city": "Rome"}, "w")
    sim, _ = simulator(spec, cache=cache, replay_only=True)
    assert meta(sim.simulate("get_weather", {"city": "Rome"}, "fresh"))["source"] == "miss"  # no Oslo before
    assert [meta(sim.simulate("get_weather", {"city": city}, "again"))["source"] for city in ("Oslo", "Rome")] == \
        ["cache", "cache"]
    smaller, _ = simulator(spec, engine=ScriptedEngine(context_size=4096), cache=cache, replay_only=True)
    assert meta(smaller.simulate("get_weather", {"city": "Oslo"}, "w"))["source"] == "miss"


def test_a_cache_written_under_an_older_prompt_version_misses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "c.db"
    monkeypatch.setattr(prompt, "PROMPT_VERSION", "0-older")
    recorder, _ = simulator(SPECS / "weather.yaml", weather("Oslo"), cache=cache)
    recorder.simulate("get_weather", {"city": "Oslo"})
    older, _ = simulator(SPECS / "weather.yaml", cache=cache, replay_only=True)
    monkeypatch.undo()
    current, engine = simulator(SPECS / "weather.yaml", cache=cache, replay_only=True)
    assert meta(older.simulate("get_weather", {"city": "Oslo"}))["source"] == "cache"
    assert meta(current.simulate("get_weather", {"city": "Oslo"}))["source"] == "miss"
    assert engine.requests == []


def test_a_replay_only_miss_names_the_tool_the_arguments_and_the_world(tmp_path: Path) -> None:
    sim, engine = simulator(SPECS / "weather.yaml", weather("Oslo"), cache=tmp_path / "c.db", replay_only=False)
    sim.replay_only = True
    result = sim.simulate("get_weather", {"city": "Oslo", "units": "metric"}, "ci-run-7")
    assert result.is_error and engine.requests == []
    assert meta(result)["source"] == "miss" and meta(result)["stage"] == "replay"
    for part in ("'get_weather'", '{"city": "Oslo", "units": "metric"}', "'ci-run-7'", "not in the cache"):
        assert part in result.text
    assert sim.worlds.existing("ci-run-7").calls == 0  # a miss leaves no trace in the world


def test_strict_answers_only_from_fixtures_cassettes_and_the_cache(time_spec: Path) -> None:
    sim, engine = simulator(time_spec, answer_json("x"), strict=True, replay=[TIME_TRACE])
    pinned = sim.simulate("get_current_time", {"timezone": "UTC"})
    recorded = sim.simulate("get_current_time", {"timezone": "Asia/Tokyo"})
    missed = sim.simulate("get_current_time", {"timezone": "Europe/Oslo"})
    assert [meta(r)["source"] for r in (pinned, recorded, missed)] == ["fixture", "cassette", "miss"]
    assert "(looked in: fixture, cassette)" in missed.text
    assert engine.requests == []


def run_cli(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_a_foreign_cache_file_is_a_clear_error_at_startup(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.db"
    foreign.write_text("my notes, not a cache")
    for extra in ([], ["--replay-only"]):
        outcome = run_cli("call", str(SPECS / "weather.yaml"), "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                          "--cache", str(foreign), *extra)
        assert outcome.exit_code == 1
        assert "not an mcp-sim response cache" in outcome.output and "Traceback" not in outcome.output
    assert foreign.read_text() == "my notes, not a cache"


def test_replay_only_needs_an_existing_cache_and_says_so(tmp_path: Path) -> None:
    outcome = run_cli("call", str(SPECS / "weather.yaml"), "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                      "--cache", str(tmp_path / "typo.db"), "--replay-only")
    assert outcome.exit_code == 1 and "no response cache at" in outcome.output
    assert not (tmp_path / "typo.db").exists()


def test_call_replay_only_without_a_cache_misses_without_loading_a_model(tmp_path: Path) -> None:
    outcome = run_cli("call", str(SPECS / "weather.yaml"), "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                      "--model", str(tmp_path / "absent.gguf"), "--replay-only")
    assert outcome.exit_code == 1, outcome.output
    result = json.loads(outcome.stdout)
    assert result["isError"] and "Replay miss" in result["content"][0]["text"]
    # No model was loaded, so _meta names none (it used to name the absent file).
    assert result["_meta"][META_KEY]["model"] == REPLAY_ENGINE_NAME


def test_a_replayed_world_hits_after_its_history_outgrew_the_context(tmp_path: Path) -> None:
    # The recording run left old turns out of prompts; a replay never asks the model, so never leaves any
    # out, and must still find every key: keys cover the whole history, not just the prompted part.
    cache = tmp_path / "c.db"
    cities = [f"City {n}" for n in range(6)]
    small = ScriptedEngine(*map(weather, cities), context_size=512 + 900)
    recorder, _ = simulator(SPECS / "weather.yaml", engine=small, cache=cache)
    recorded = [recorder.simulate("get_weather", {"city": city}, "w") for city in cities]
    assert sum(meta(r)["dropped_turns"] for r in recorded) > 0
    sim, _ = simulator(SPECS / "weather.yaml", engine=ScriptedEngine(context_size=512 + 900), cache=cache,
                       replay_only=True)
    assert [meta(sim.simulate("get_weather", {"city": city}, "w"))["source"] for city in cities] == ["cache"] * 6


def test_spec_fixtures_are_checked_at_load_and_other_x_sim_keys_are_refused(tmp_path: Path) -> None:
    from mcp_sim.base.errors import SpecError

    document = yaml.safe_load((SPECS / "weather.yaml").read_text())
    document["tools"][0]["x-sim"]["fixtures"] = [{"match": {"city": 5}, "result": {"city": "Oslo"}}]
    document["tools"][1]["x-sim"] = {"fixture": []}
    path = tmp_path / "weather.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(SpecError) as raised:
        load_catalog([path])
    problems = raised.value.problems
    assert any(p.startswith(f"{path}#/tools/0 (tool 'get_weather')/x-sim/fixtures/0/match: ") for p in problems)
    expected = ("must be a mapping with any of closeStream, content, elicit, examples, faults, fixtures, logs, "
                "notifications, read_only, roots, rules, sample, state, text_json")
    assert f"{path}#/tools/1 (tool 'get_forecast')/x-sim: {expected}" in problems
    assert len(load_catalog([SPECS / "weather.yaml"]).tools["get_weather"].fixtures) == 0
