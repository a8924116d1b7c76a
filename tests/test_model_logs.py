"""Log messages the model writes for a call (x-sim `logs`), through a real MCP client in-process; a scripted
engine stands for the model (tests/test_simulator_model.py has the real one write them)."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from mcp_sim.base.errors import SpecError
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.serving.server import create_server
from tests.scripted import ScriptedEngine

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

SPEC = """
tools:
  - name: pay
    description: Charge a card.
    inputSchema: {type: object, properties: {amount: {type: number}}}
    x-sim: {logs: {count: 2, levels: [info, warning], logger: payments}}
"""
WRITTEN = json.dumps({"logs": [{"level": "info", "data": "charging card ending 4242"},
                               {"level": "warning", "data": "gateway slow, retried once"}]})


async def test_the_model_writes_log_lines_sent_at_the_clients_level(tmp_path: Path) -> None:
    path = tmp_path / "pay.yaml"
    path.write_text(SPEC)
    engine = ScriptedEngine("Paid 12.50.", WRITTEN)
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    server = create_server(Simulator(load_catalog([path]), engine, SimOptions(attempts=1)))
    async with Client(server, mode="legacy", logging_callback=on_log) as client:
        await client.set_logging_level("warning")
        result = await client.call_tool("pay", {"amount": 12.5})
    assert [(log.level, log.data, log.logger) for log in logs] == [
        ("warning", "gateway slow, retried once", "payments")]
    assert isinstance(result.content[0], types.TextContent) and result.content[0].text == "Paid 12.50."
    # The second generation continues the call's conversation after the answer, under the logs grammar.
    request = engine.requests[1]
    assert request.messages[-2].content == "Paid 12.50." and "log lines" in request.messages[-1].content
    schema = request.json_schema or {}
    assert schema["properties"]["logs"]["maxItems"] == 2
    assert schema["properties"]["logs"]["items"]["properties"]["level"]["enum"] == ["info", "warning"]


def test_a_malformed_logs_declaration_is_named(tmp_path: Path) -> None:
    path = tmp_path / "pay.yaml"
    path.write_text(SPEC.replace("count: 2, levels: [info, warning]", "count: 0, levels: [loud]"))
    with pytest.raises(SpecError) as failed:
        load_catalog([path])
    assert "x-sim/logs/count: must be a whole number from 1 to 10" in str(failed.value)
    assert "x-sim/logs/levels: must be a list of debug" in str(failed.value)
