"""A real mcp client talking to `mcp-sim serve` as a stdio subprocess."""

from __future__ import annotations

import sys

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_sim.core.simulator import META_KEY
from mcp_sim.core.specs import load_catalog, validation_error
from tests.conftest import SPECS, subprocess_env
from tests.test_simulator_model import ONE_PER_SPEC

pytestmark = pytest.mark.anyio



def stdio_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", *args],
                                 env=subprocess_env())


async def test_lists_exactly_the_spec_schemas_and_every_spec_answers_over_stdio() -> None:
    catalog = load_catalog([SPECS])
    async with Client(stdio_params(str(SPECS)), mode="legacy", read_timeout_seconds=300) as client:
        listed = await client.list_tools()
        advertised = {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools}
        assert advertised == {name: tool.definition() for name, tool in catalog.tools.items()}
        assert "SIMULATED" in (client.instructions or "")
        for name, arguments in ONE_PER_SPEC:
            # A session of its own per tool keeps each prompt independent of the others.
            result = await client.call_tool(name, arguments, meta={"mcp-sim/session": name})
            assert not result.is_error, f"{name}: {result.content}"
            assert result.meta is not None and result.meta[META_KEY]["simulated"] is True
            schema = catalog.tools[name].output_schema
            if schema is not None:
                assert result.structured_content is not None
                assert validation_error(result.structured_content, schema) is None
                assert result.content[0].type == "text"


async def test_bad_arguments_and_unknown_tools_then_the_server_still_answers() -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(stdio_params(str(SPECS / "weather.yaml")), mode="legacy", read_timeout_seconds=120) as client:
        bad = await client.call_tool("get_weather", {"city": 42})
        assert bad.is_error and "Input validation error" in bad.content[0].text and "42" in bad.content[0].text
        with pytest.raises(MCPError, match="Unknown tool 'launch_rockets'"):
            await client.call_tool("launch_rockets", {})
        good = await client.call_tool("get_forecast", {"city": "Oslo", "days": 3}, progress_callback=on_progress)
        assert not good.is_error and good.structured_content is not None
        assert len(good.structured_content["days"]) >= 1
    assert progress, "expected progress notifications while generating"


async def test_a_modern_protocol_client_is_served_too() -> None:
    async with Client(stdio_params(str(SPECS / "weather.yaml")), read_timeout_seconds=120) as client:
        assert client.protocol_version >= "2026"
        result = await client.call_tool("get_weather", {"city": "Quito"})
        assert not result.is_error and result.structured_content is not None

