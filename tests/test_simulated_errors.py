"""Simulated tool failures (--simulate-errors): the model may answer a call that cannot succeed with an
isError result, in the shape real tools use; without the option such an answer is a schema failure."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

MISSING = json.dumps({"error": "customer C-9999 not found"})


def test_a_structured_failure_becomes_an_is_error_result_and_stays_in_the_history() -> None:
    catalog = load_catalog([SPECS])
    engine = ScriptedEngine(MISSING, json.dumps({"found": False}))
    sim = Simulator(catalog, engine, SimOptions(simulate_errors=True))
    failed = sim.simulate("get_customer", {"customer_id": "C-9999"}, world="E")
    assert failed.is_error and failed.text == "customer C-9999 not found" and failed.structured is None
    assert failed.meta[META_KEY]["simulated_error"] is True and failed.meta[META_KEY]["attempts"] == 1
    # The world keeps what it said: asked again, C-9999 is missing without the model.
    again = sim.simulate("get_customer", {"customer_id": "C-9999"}, world="E")
    assert again.is_error and again.meta[META_KEY]["source"] == "state" and len(engine.requests) == 1
    sim.simulate("get_customer", {"customer_id": "C-9998"}, world="E")
    assert engine.requests[1].messages[2].content == MISSING  # the next call sees the failure
    # The grammar offers the failure shape beside the tool's own, and the prompt says when to use it.
    grammar = engine.requests[0].json_schema
    assert grammar is not None and grammar["anyOf"][1]["required"] == ["error"]
    assert '{"error": "<the message the real tool gives>"}' in engine.requests[0].messages[0].content


def test_text_tools_fail_with_an_error_line() -> None:
    sim = Simulator(load_catalog([SPECS]), ScriptedEngine("Error: unknown service 'mail'"),
                    SimOptions(simulate_errors=True))
    result = sim.simulate("tail_logs", {"service": "api", "lines": 2})
    assert result.is_error and result.text == "Error: unknown service 'mail'"


def test_without_the_option_a_failure_shape_is_just_a_schema_miss() -> None:
    engine = ScriptedEngine(MISSING)
    sim = Simulator(load_catalog([SPECS]), engine, SimOptions(attempts=1))
    result = sim.simulate("get_customer", {"customer_id": "C-9999"})
    assert result.is_error and "did not fit the tool's outputSchema" in result.text
    assert "anyOf" not in (engine.requests[0].json_schema or {})
    assert '{"error"' not in engine.requests[0].messages[0].content


def test_the_real_model_answers_within_the_grammar_with_its_failure_branch(model_path: Path) -> None:
    catalog = load_catalog([SPECS / "crm.yaml"])
    engine = LlamaEngine(model_path, n_ctx=8192, n_threads=2)
    options = SimOptions(simulate_errors=True, max_tokens=256, temperature=0.0, attempts=1)
    sim = Simulator(catalog, engine, options)
    for tool in catalog.tools.values():  # every grammar, failure branch included, parses in llama.cpp
        assert engine.schema_support(sim.model.grammar_schema(tool)[0]) is None
    schema = catalog.tools["get_customer"].output_schema
    assert schema is not None
    outcomes = []
    for customer in ("C-4242", "C-1001", "C-0000"):
        result = sim.simulate("get_customer", {"customer_id": customer}, world=customer)
        meta = result.meta[META_KEY]
        assert meta.get("stage") is None, result.text  # the answer always fits one branch of the grammar
        # The label and the shape agree: a failure carries a message and no structured content; a success
        # is schema-valid structured content.
        if meta.get("simulated_error"):
            assert result.is_error and result.structured is None and result.text.strip()
        else:
            assert not result.is_error and validation_error(result.structured, schema) is None
        outcomes.append(result.text)
    # Greedy decoding is deterministic: a fresh engine gives the same three outcomes.
    fresh = Simulator(catalog, LlamaEngine(model_path, n_ctx=8192, n_threads=2), options)
    assert outcomes == [fresh.simulate("get_customer", {"customer_id": c}, world=c).text
                        for c in ("C-4242", "C-1001", "C-0000")]
