"""Settings precedence (flag, then manifest, then default) and the native prompt of Qwen-AgentWorld."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from mcp_sim.base.errors import McpSimError
from mcp_sim.core.engine_setup import EngineSettings, prepare, sim_options
from mcp_sim.core.prompt import Turn, build_messages, system_prompt
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.models.registry import load_registry
from tests.conftest import SPECS

REPO = Path(__file__).resolve().parent.parent


def test_reference_model_defaults_come_from_its_manifest() -> None:
    manifest = load_registry([REPO / "models"])["qwen-agentworld-35b-a3b"]
    options, ctx = sim_options(EngineSettings(), manifest)
    assert options.prompt_style == "agentworld" and options.think
    assert (options.temperature, options.top_p, options.top_k) == (0.6, 0.95, 20)
    assert (options.max_tokens, options.think_budget, options.repeat_penalty) == (4096, 8192, 1.0)
    assert ctx == 32768


def test_flags_override_the_manifest_and_defaults_fill_the_rest() -> None:
    manifest = load_registry([REPO / "models"])["qwen-agentworld-35b-a3b"]
    flags = EngineSettings(temperature=0.0, top_k=0, think=False, prompt_style="generic", ctx=9000,
                           max_tokens=300)
    options, ctx = sim_options(flags, manifest)
    assert (options.temperature, options.top_k) == (0.0, 0)
    assert (options.think, options.prompt_style) == (False, "generic")
    assert (options.top_p, options.max_tokens, ctx) == (0.95, 300, 9000)
    bare, bare_ctx = sim_options(EngineSettings(), None)
    assert (bare.prompt_style, bare.think, bare.temperature, bare_ctx) == ("generic", False, 0.2, 8192)


def test_a_context_without_room_for_the_budgets_is_refused_at_startup() -> None:
    manifest = load_registry([REPO / "models"])["qwen-agentworld-35b-a3b"]
    with pytest.raises(McpSimError, match=r"8192-token context leaves no room.*--think-budget"):
        sim_options(EngineSettings(ctx=8192), manifest)
    with pytest.raises(McpSimError, match="--engine openai needs --base-url"):
        prepare(EngineSettings(engine="openai", model="x"))


def test_agentworld_prompt_has_the_native_shape() -> None:
    spec_set = load_catalog([str(SPECS / "weather.yaml")]).spec_sets[0]
    system = system_prompt(spec_set, "agentworld")
    headings = ["# Role and Objective", "# Environment Management", "## World State",
                "# Input Definitions & Action Space", "# Predicted Observation Requirements",
                "# Demonstrations"]
    positions = [system.index(h) for h in headings]
    assert positions == sorted(positions)
    assert "**Tool World Model**" in system and '"name":"get_forecast"' in system
    assert ('### Turn 1\n**Action:**\n```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```\n'
            '**Environment Observation:**\n{"city": "Oslo"') in system
    messages = build_messages(system, [Turn('{"name": "a", "arguments": {}}', "done")], '{"name": "b"}',
                              "agentworld")
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1].content.startswith("### Turn 1\n**Action:**\n```json\n")
    assert messages[2].content == "**Environment Observation:**\ndone"
    assert messages[3].content == '### Turn 2\n**Action:**\n```json\n{"name": "b"}\n```'
    assert system_prompt(spec_set) != system  # the generic prompt is unchanged and distinct


def test_agentworld_prompt_with_thinking_answers_within_the_schema(model_path: Path) -> None:
    catalog = load_catalog([str(SPECS / "weather.yaml")])
    simulator = Simulator(catalog, LlamaEngine(model_path, n_ctx=4096),
                          SimOptions(max_tokens=160, prompt_style="agentworld", think=True, think_budget=16,
                                     expose_prompt=True))
    first = simulator.simulate("get_weather", {"city": "Lisbon"}, world="s")
    second = simulator.simulate("get_weather", {"city": "Porto"}, world="s")
    for result in (first, second):
        assert not result.is_error, result.text
        jsonschema.validate(result.structured, catalog.tools["get_weather"].output_schema)
    prompt = second.meta["mcp-sim/simulation"]["prompt"]
    assert prompt[-1]["content"].startswith("### Turn 2\n**Action:**")
    assert prompt[-2]["content"].startswith("**Environment Observation:**\n{")
