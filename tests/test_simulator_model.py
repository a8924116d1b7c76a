"""The simulator on the real engine: SmolLM2 through llama.cpp answers every shipped tool within its schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS

# One realistic call per shipped tool.
CALLS = [
    ("get_weather", {"city": "Oslo"}), ("get_forecast", {"city": "Lima", "days": 2}),
    ("write_file", {"path": "/notes/plan.txt", "content": "ship it"}), ("read_file", {"path": "/notes/plan.txt"}),
    ("list_files", {"prefix": "/notes"}), ("delete_file", {"path": "/notes/plan.txt"}),
    ("get_customer", {"customer_id": "C-1001"}), ("search_customers", {"query": "Lindqvist"}),
    ("create_ticket", {"customer_id": "C-1002", "subject": "Zipper broke", "priority": "high"}),
    ("list_tickets", {"customer_id": "C-1001"}),
    ("restart_service", {"service": "worker"}), ("drop_cache", {"cache": "redis"}),
    ("get_service_status", {"service": "api"}), ("tail_logs", {"service": "api", "lines": 3}),
]
# One of them per shipped spec: what the transport tests send (every tool's answer is proven here, in-process;
# over the wire, every schema is listed and each spec's prompt answers).
ONE_PER_SPEC = [CALLS[0], CALLS[2], CALLS[8], CALLS[10]]


@pytest.fixture(scope="module")
def engine(model_path: Path) -> Iterator[LlamaEngine]:
    engine = LlamaEngine(model_path, n_ctx=8192, n_threads=2)
    engine.load()
    yield engine


def test_every_shipped_tool_gets_a_schema_valid_answer_from_the_real_model(engine: LlamaEngine) -> None:
    catalog = load_catalog([SPECS])
    assert {name for name, _ in CALLS} == set(catalog.tools), "add a call for every shipped tool"
    sim = Simulator(catalog, engine, SimOptions(max_tokens=384))
    for name, arguments in CALLS:
        result = sim.simulate(name, arguments, world="every-tool")
        tool = catalog.tools[name]
        assert not result.is_error, f"{name}: {result.text}"
        meta = result.meta[META_KEY]
        assert meta["simulated"] is True and meta["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
        # A read the world's live data answers whole never reaches the model.
        assert meta["source"] == "state" or (meta["completion_tokens"] > 0 and meta["prompt_tokens"] > 100)
        if tool.output_schema is None:
            assert result.structured is None and result.text.strip()
        else:
            assert result.structured is not None
            assert validation_error(result.structured, tool.output_schema) is None


def test_regression_create_ticket_does_not_loop_at_temperature_zero(engine: LlamaEngine) -> None:
    """SmolLM2 once filled create_ticket's id with digits until max_tokens ran out."""
    catalog = load_catalog([SPECS])
    sim = Simulator(catalog, engine, SimOptions(temperature=0.0, max_tokens=256, attempts=1))
    result = sim.simulate("create_ticket", {"customer_id": "C-1003", "subject": "Refund", "priority": "low"},
                          world="loop")
    assert not result.is_error, result.text
    assert result.meta[META_KEY]["completion_tokens"] < 256


def test_the_cached_prefix_is_reused_within_a_session(engine: LlamaEngine) -> None:
    catalog = load_catalog([SPECS])
    sim = Simulator(catalog, engine, SimOptions(max_tokens=128))
    first = sim.simulate("get_weather", {"city": "Bergen"}, world="prefix").meta[META_KEY]
    second = sim.simulate("get_weather", {"city": "Tromso"}, world="prefix").meta[META_KEY]
    assert second["history_turns"] == 1
    assert second["evaluated_tokens"] < first["prompt_tokens"] / 4


def test_the_real_model_writes_log_lines_for_a_call(engine: LlamaEngine, tmp_path: Path) -> None:
    spec = tmp_path / "pay.yaml"
    spec.write_text("tools:\n  - name: charge_card\n    description: Charge a customer's card.\n"
                    "    inputSchema: {type: object, properties: {amount: {type: number}}}\n"
                    "    x-sim: {logs: {count: 2, levels: [info, warning]}}\n")
    sim = Simulator(load_catalog([spec]), engine, SimOptions(max_tokens=96, attempts=1))
    result = sim.simulate("charge_card", {"amount": 12.5}, world="logs")
    assert not result.is_error, result.text
    logs = result.interactions or []
    assert 1 <= len(logs) <= 2
    for log in logs:
        assert log["notification"] == "notifications/message"
        assert log["params"]["level"] in ("info", "warning") and log["params"]["data"].strip()
