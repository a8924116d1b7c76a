"""Two-phase thinking with the real model: free reasoning up to a budget, then a grammar-bound answer.

SmolLM2 was never trained to think, which makes it a strict test of the mechanics: it rambles for the
whole budget, and none of that may reach the result.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import ChatMessage, GenerationRequest
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "temperature"],
          "properties": {"city": {"type": "string", "maxLength": 24}, "temperature": {"type": "number"}}}
MESSAGES = [ChatMessage("system", "You simulate a weather tool. Think it through, then answer with JSON."),
            ChatMessage("user", '{"name": "get_weather", "arguments": {"city": "Lisbon"}}')]
# A Qwen3-style template: thinking off appends an empty think block, thinking on opens one.
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% else %}<think>\n{% endif %}{% endif %}")


@pytest.fixture(scope="module")
def engine(model_path: Path) -> Iterator[LlamaEngine]:
    engine = LlamaEngine(model_path, n_ctx=2048, seed=0)
    yield engine
    engine.close()


def test_two_slots_think_and_answer_as_one_slot(model_path: Path) -> None:
    request = GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=SCHEMA, schema_key="thinking-test",
                                think=True, think_budget=24, temperature=0.0)
    answers = []
    for slots in (1, 2):
        engine = LlamaEngine(model_path, n_ctx=2048, seed=0, slots=slots)
        answers.append(engine.generate(request))
        engine.close()
    one, batched = answers
    assert batched.reasoning_tokens == one.reasoning_tokens == 24
    assert (batched.reasoning, batched.text, batched.completion_tokens) == (one.reasoning, one.text,
                                                                          one.completion_tokens)


def test_reasoning_stays_out_of_a_schema_valid_answer(engine: LlamaEngine) -> None:
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=SCHEMA,
                                                   schema_key="thinking-test", think=True, think_budget=40))
    assert generation.reasoning and len(generation.reasoning) > 20
    assert 0 < generation.reasoning_tokens <= 40
    assert generation.completion_tokens > generation.reasoning_tokens
    answer = json.loads(generation.text)
    jsonschema.validate(answer, SCHEMA)
    assert "<think>" not in generation.text and "</think>" not in generation.text
    assert generation.reasoning[:20] not in generation.text


def test_think_budget_zero_and_thinking_off_answer_directly(engine: LlamaEngine) -> None:
    direct = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=SCHEMA,
                                               schema_key="thinking-test", think=True, think_budget=0))
    assert direct.reasoning == "" and direct.reasoning_tokens == 0
    jsonschema.validate(json.loads(direct.text), SCHEMA)
    plain = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=SCHEMA,
                                              schema_key="thinking-test"))
    assert plain.reasoning is None and plain.reasoning_tokens == 0


def test_simulated_call_logs_reasoning_and_returns_only_the_answer(engine: LlamaEngine,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    catalog = load_catalog([str(SPECS / "weather.yaml")])
    simulator = Simulator(catalog, engine, SimOptions(max_tokens=160, think=True, think_budget=32))
    with caplog.at_level(logging.DEBUG, logger="mcp_sim.engines.llama"):
        result = simulator.simulate("get_weather", {"city": "Lisbon"})
    assert not result.is_error, result.text
    assert result.structured is not None
    jsonschema.validate(result.structured, catalog.tools["get_weather"].output_schema)
    meta = result.meta["mcp-sim/simulation"]
    assert 0 < meta["reasoning_tokens"] <= 32
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reasoning (")]
    assert logged, "the reasoning goes to the debug log"
    reasoning = logged[-1].split(": ", 1)[1]
    assert len(reasoning) > 20
    assert reasoning[:20] not in result.text and "think>" not in result.text


def test_thinking_switch_reaches_templates_that_support_it(model_path: Path) -> None:
    engine = LlamaEngine(model_path, n_ctx=1024, chat_template=THINKING_TEMPLATE)
    off = engine.render_prompt(MESSAGES, think=False)
    on = engine.render_prompt(MESSAGES, think=True)
    assert off.endswith("<think>\n\n</think>\n\n")
    assert on.endswith("<think>\n") and "</think>" not in on
    # The template opened the block itself, so the engine must not open a second one.
    generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=48, json_schema=SCHEMA,
                                                   schema_key="thinking-test", think=True, think_budget=12))
    jsonschema.validate(json.loads(generation.text), SCHEMA)
    decoder = engine._decoder  # what the model actually read and wrote: the tokens its slot evaluated
    assert decoder is not None and engine._codec is not None
    seen = engine._codec.detokenize(decoder.slots[0].tokens, True).decode()
    assert seen.count("<think>") == 1 and seen.count("</think>") == 1


def test_the_answer_after_thinking_jumps_over_its_forced_span(model_path: Path) -> None:
    """The grammar starts after the reasoning block: its forced span (the pinned city) is fed with the
    closing suffix, in one batch."""
    engine = LlamaEngine(model_path, n_ctx=2048, seed=0, chat_template=THINKING_TEMPLATE)
    pinned = {**SCHEMA, "properties": {"city": {"const": "Lisbon, the capital"}, "temperature": {"type": "number"}}}
    try:
        generation = engine.generate(GenerationRequest(messages=MESSAGES, max_tokens=64, json_schema=pinned,
                                                       schema_key="thinking-pinned", think=True, think_budget=16,
                                                       temperature=0.0))
    finally:
        engine.close()
    assert generation.reasoning_tokens > 0
    assert json.loads(generation.text)["city"] == "Lisbon, the capital"
    assert generation.text.startswith('{"city": "Lisbon, the capital", "temperature": ')
    assert generation.forced_tokens >= 8, generation  # '{"city": "Lisbon, the capital", "temperature": '
