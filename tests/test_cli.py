"""`mcp-sim call` and `mcp-sim check` through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from mcp_sim.cli import cli
from mcp_sim.core.specs import load_catalog, validation_error
from tests.conftest import SPECS

WEATHER = str(SPECS / "weather.yaml")


def test_check_summarizes_the_shipped_specs() -> None:
    result = CliRunner().invoke(cli, ["check", str(SPECS)])
    assert result.exit_code == 0, result.output
    assert "get_customer: outputSchema, grammar ok" in result.output
    assert "tail_logs: text output" in result.output
    assert "restart_service: outputSchema, grammar ok, 1 example(s) [destructiveHint]" in result.output
    assert f"OK: {len(load_catalog([SPECS]).tools)} tool(s) in 4 file(s)" in result.output


def test_check_exits_1_listing_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "a b"}, {"name": "c", "inputSchema": {"type": "string"}}]))
    result = CliRunner().invoke(cli, ["check", str(bad)])
    assert result.exit_code == 1
    assert "not a valid MCP tool name" in result.output and 'root must have "type": "object"' in result.output


def test_call_prints_the_result_as_a_client_receives_it() -> None:
    result = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                                      "--max-tokens", "128"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) == {"content", "structuredContent", "isError", "_meta"}
    assert payload["isError"] is False and payload["_meta"]["mcp-sim/simulation"]["simulated"] is True
    schema = load_catalog([WEATHER]).tools["get_weather"].output_schema
    assert schema is not None and validation_error(payload["structuredContent"], schema) is None
    assert json.loads(payload["content"][0]["text"]) == payload["structuredContent"]


def test_call_with_bad_arguments_prints_an_error_result_and_exits_1() -> None:
    result = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "get_weather", "--args", '{"town": "Oslo"}'])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["isError"] is True and "'city' is a required property" in payload["content"][0]["text"]


def test_call_rejects_unknown_tools_and_non_json_arguments() -> None:
    unknown = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "nope"])
    assert unknown.exit_code == 2 and "Unknown tool 'nope'" in unknown.output
    not_json = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "get_weather", "--args", "{city"])
    assert not_json.exit_code == 2 and "not JSON" in not_json.output


def test_call_with_a_missing_model_says_what_to_fix(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["call", WEATHER, "--tool", "get_weather", "--args", '{"city": "Oslo"}',
                                      "--model", str(tmp_path / "gone.gguf")])
    assert result.exit_code == 1
    assert f"model file {tmp_path / 'gone.gguf'} does not exist" in result.output
