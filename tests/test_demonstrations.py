"""Every distinct example learn keeps, and the nearest ones with each call: the system prompt shows each
tool's first examples, a call brings the nearest of the rest after it, the response cache keys what a call
may bring, and learn keeps every distinct example within its budget, an error second. The last test runs
the real model over a real stdio server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import yaml
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from mcp_sim.base import defaults
from mcp_sim.cli import cli
from mcp_sim.core.calls import Call
from mcp_sim.core.prompt import NEAREST_INTRO, PROMPT_VERSION
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.learn import learn
from mcp_sim.rehearsal.cache import ResponseCache, cache_key, json_digest
from mcp_sim.rehearsal.sources import CacheKeys, CacheRecorder, CacheSource
from mcp_sim.rehearsal.traces import TraceRecord
from tests.conftest import subprocess_env
from tests.scripted import ScriptedEngine

CITIES = ["Oslo", "Lima", "Perth", "Quito", "Accra", "Hanoi"]


def _weather(cities: list[str] = CITIES) -> dict[str, Any]:
    document: dict[str, Any] = {"server": {"name": "weather"}, "tools": [{
        "name": "forecast", "description": "Tomorrow's forecast for a city.",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
                        "required": ["city"]},
        "x-sim": {"examples": [{"arguments": {"city": city, "units": "metric"},
                                "result": f"{city}: {10 + number} C, wind {number} m/s"}
                               for number, city in enumerate(cities)]}}]}
    return document


def _simulator(tmp_path: Path, document: dict[str, Any], *answers: str, layout: str = "full"
               ) -> tuple[Simulator, ScriptedEngine]:
    spec = tmp_path / "weather.yaml"
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    engine = ScriptedEngine(*answers)
    catalog = load_catalog([spec])
    for spec_set in catalog.spec_sets:
        spec_set.prompt_layout = layout  # as prompt_budget lays out a spec too large for the context
    return Simulator(catalog, engine, SimOptions()), engine


def test_the_system_prompt_shows_the_first_examples_and_a_call_brings_the_nearest_of_the_rest(
        tmp_path: Path) -> None:
    simulator, engine = _simulator(tmp_path, _weather(), "Hanoi: 14 C, wind 5 m/s", "Rome: 9 C")
    simulator.simulate("forecast", {"city": "Hanoi", "units": "metric"}, world="W")
    system, call = engine.requests[0].messages[0].content, engine.requests[0].messages[-1].content
    shown = CITIES[:defaults.SHOWN_EXAMPLES]
    assert all(f'"{city}"' in system for city in shown)
    assert not any(f'"{city}"' in system for city in CITIES[defaults.SHOWN_EXAMPLES:])
    # The call itself first (the history keeps it bare), then the nearest unshown examples, the nearest last.
    assert call.startswith('{"name": "forecast"') and NEAREST_INTRO in call
    brought = call[call.index(NEAREST_INTRO):]
    assert brought.rstrip().endswith("Observation: Hanoi: 15 C, wind 5 m/s")
    assert brought.count("Action:") == defaults.NEAREST_EXAMPLES
    assert not any(f'"{city}"' in brought for city in shown)

    simulator.simulate("forecast", {"city": "Rome", "units": "imperial"}, world="W")
    history = engine.requests[1].messages
    assert NEAREST_INTRO not in history[1].content  # the earlier call is in the history bare
    assert history[-1].content.count("Action:") == defaults.NEAREST_EXAMPLES  # the nearest of any: still two


def test_a_tool_with_no_more_examples_than_shown_brings_none(tmp_path: Path) -> None:
    simulator, engine = _simulator(tmp_path, _weather(cities=CITIES[:defaults.SHOWN_EXAMPLES]), "Oslo: 1 C")
    simulator.simulate("forecast", {"city": "Oslo"}, world="W")
    assert NEAREST_INTRO not in engine.requests[0].messages[-1].content


def test_an_indexed_spec_shows_no_examples_in_its_system_prompt_and_brings_the_nearest(tmp_path: Path) -> None:
    simulator, engine = _simulator(tmp_path, _weather(), "Perth: 12 C", layout="index")
    simulator.simulate("forecast", {"city": "Perth", "units": "metric"}, world="W")
    system, call = engine.requests[0].messages[0].content, engine.requests[0].messages[-1].content
    assert not any(f'"{city}"' in system for city in CITIES)
    assert call.rstrip().endswith("Observation: Perth: 12 C, wind 2 m/s")


def test_the_cache_key_covers_the_examples_a_call_may_bring(tmp_path: Path) -> None:
    keys = CacheKeys(model_hash="m", options_digest="o")
    calls: list[Call] = []

    class Keep:
        def observed(self, call: Call, result: Any, source: str) -> None:
            calls.append(call)

    def answered(document: dict[str, Any]) -> str:
        spec = tmp_path / "weather.yaml"
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        simulator = Simulator(load_catalog([spec]), ScriptedEngine("Oslo: 3 C"), SimOptions(),
                              sources=[CacheSource(cache, keys)], observers=[CacheRecorder(cache, keys, "m"), Keep()])
        return str(simulator.simulate("forecast", {"city": "Oslo"}, world="W").meta[META_KEY]["source"])

    with ResponseCache(tmp_path / "cache.db") as cache:
        assert answered(_weather()) == "model"
        assert answered(_weather()) == "cache"
        changed = _weather()
        changed["tools"][0]["x-sim"]["examples"][-1]["result"] = "Hanoi: -40 C"  # an unshown example
        assert answered(changed) == "model"
    # Without unshown examples the spec digest is the system prompt's alone: older caches keep their keys.
    with ResponseCache(tmp_path / "few.db") as cache:
        answered(_weather(cities=CITIES[:defaults.SHOWN_EXAMPLES]))
    call = calls[-1]
    assert keys.key(call) == cache_key(
        model_hash="m", prompt_version=PROMPT_VERSION, spec_digest=json_digest(call.system), history=[],
        tool="forecast", arguments={"city": "Oslo"}, seed=call.seed, options_digest="o", state=None)


def _record(step: int, city: str, text: str, is_error: bool = False) -> TraceRecord:
    return TraceRecord(session="train", step=step, tool="forecast", arguments={"city": city},
                       result={"content": [{"type": "text", "text": text}], "isError": is_error}, is_error=is_error)


def test_learn_keeps_every_distinct_example_within_the_budget_an_error_second() -> None:
    records = [_record(number, city, f"{city}: {number} C") for number, city in enumerate(CITIES)]
    records.append(_record(9, "Atlantis", "Error: no such city", is_error=True))
    records.append(_record(10, "Oslo", "Oslo: again"))  # the same arguments: not distinct
    document = {"tools": [{"name": "forecast", "inputSchema": _weather()["tools"][0]["inputSchema"]}]}
    learn(document, records)
    examples = document["tools"][0]["x-sim"]["examples"]
    assert len(examples) == len(CITIES) + 1
    assert examples[1].get("isError") is True  # shown in the system prompt
    assert [e["arguments"]["city"] for e in examples].count("Oslo") == 1

    small = {"tools": [{"name": "forecast", "inputSchema": _weather()["tools"][0]["inputSchema"]}]}
    size = len(json.dumps({"arguments": {"city": "Oslo"}, "result": "Oslo: 0 C"}))
    failed = len(json.dumps({"arguments": {"city": "Atlantis"}, "result": "Error: no such city", "isError": True}))
    learn(small, records, tool_chars=2 * size + failed + 5)
    assert len(small["tools"][0]["x-sim"]["examples"]) == 3
    limited = {"tools": [{"name": "forecast", "inputSchema": _weather()["tools"][0]["inputSchema"]}]}
    learn(limited, records, max_per_tool=2)
    assert len(limited["tools"][0]["x-sim"]["examples"]) == 2


def test_learn_on_the_command_line_takes_a_tool_budget(tmp_path: Path) -> None:
    spec = tmp_path / "weather.yaml"
    document = _weather()
    document["tools"][0].pop("x-sim")
    spec.write_text(yaml.safe_dump(document))
    traces = tmp_path / "train.jsonl"
    traces.write_text("".join(json.dumps({"session": "t", "step": n, "tool": "forecast", "arguments": {"city": c},
                                          "result": {"content": [{"type": "text", "text": f"{c}: {n} C"}]},
                                          "is_error": False}) + "\n" for n, c in enumerate(CITIES)))
    result = CliRunner().invoke(cli, ["learn", str(traces), "--spec", str(spec), "--tool-chars", "120"])
    assert result.exit_code == 0, result.output
    assert len(yaml.safe_load(spec.read_text())["tools"][0]["x-sim"]["examples"]) == 2


def test_the_real_model_is_shown_the_nearest_examples_over_stdio(tmp_path: Path) -> None:
    spec = tmp_path / "weather.yaml"
    spec.write_text(yaml.safe_dump(_weather(), sort_keys=False))

    async def session() -> Any:
        args = ["-m", "mcp_sim", "serve", str(spec), "--threads", "2", "--expose-prompt", "--max-tokens", "24"]
        params = StdioServerParameters(command=sys.executable, args=args, env=subprocess_env())
        async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
            return await client.call_tool("forecast", {"city": "Accra", "units": "metric"})

    result = anyio.run(session)
    assert not result.is_error and result.meta is not None
    meta = result.meta[META_KEY]
    assert meta["source"] == "model" and result.content
    last = meta["prompt"][-1]["content"]
    assert last.rstrip().endswith("Observation: Accra: 14 C, wind 4 m/s")
    assert '"Accra"' not in meta["prompt"][0]["content"]
