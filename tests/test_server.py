"""The MCP layer in memory: a real `mcp.Client` against `create_server` over a scripted engine."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.serving.scheduler import FairScheduler
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

pytestmark = pytest.mark.anyio

WEATHER = json.dumps({"city": "Oslo", "temperature": 3.5, "conditions": "snow", "units": "metric"})


class GatedEngine(ScriptedEngine):
    """Answers only once the test opens the gate: calls pile up in the scheduler meanwhile."""

    def __init__(self, *answers: str):
        super().__init__(*answers)
        self.gate = threading.Event()

    def generate(self, request: GenerationRequest) -> Generation:
        self.gate.wait(timeout=30)
        return super().generate(request)


def weather_server(engine: ScriptedEngine, **options: object) -> Simulator:
    return Simulator(load_catalog([SPECS / "weather.yaml"]), engine, SimOptions(attempts=1), **options)  # type: ignore[arg-type]


async def test_tools_are_advertised_verbatim_icons_execution_and_meta_included(tmp_path: Path) -> None:
    tool = {"name": "launch", "title": "Launch", "description": "Launch a probe.",
            "inputSchema": {"type": "object", "properties": {"target": {"type": "string"}}},
            "icons": [{"src": "https://example.com/probe.png", "mimeType": "image/png"}],
            "execution": {"taskSupport": "optional"}, "_meta": {"vendor/flag": True},
            "annotations": {"destructiveHint": True}}
    spec = tmp_path / "probe.yaml"
    spec.write_text(yaml.safe_dump({"tools": [tool]}))
    server = create_server(Simulator(load_catalog([spec]), ScriptedEngine()))
    # `execution` (task support) exists in the 2025-11-25 protocol only; the SDK leaves it out of newer ones.
    async with Client(server, mode="legacy") as client:
        listed = await client.list_tools()
    assert [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools] == [tool]


async def test_a_call_is_answered_in_the_world_its_meta_names() -> None:
    async with Client(create_server(weather_server(ScriptedEngine(WEATHER, WEATHER)))) as client:
        named = await client.call_tool("get_weather", {"city": "Oslo"}, meta={"mcp-sim/world": "north"})
        default = await client.call_tool("get_weather", {"city": "Oslo"})
    assert named.structured_content == json.loads(WEATHER)
    assert named.meta[META_KEY]["world"] == "north" and named.meta[META_KEY]["source"] == "model"
    assert default.meta[META_KEY]["world"] == "default"  # in memory, like stdio: the process's default world


async def test_unknown_tools_are_protocol_errors_and_bad_arguments_tool_errors() -> None:
    async with Client(create_server(weather_server(ScriptedEngine()))) as client:
        with pytest.raises(MCPError, match="Unknown tool 'nope'"):
            await client.call_tool("nope", {})
        bad = await client.call_tool("get_weather", {"city": 7})
    assert bad.is_error and bad.meta[META_KEY]["stage"] == "arguments"


async def test_past_the_queue_limit_a_call_gets_a_busy_tool_error() -> None:
    engine = GatedEngine(WEATHER, WEATHER)
    server = create_server(weather_server(engine), scheduler=FairScheduler(slots=1, max_waiting=1))
    results: dict[str, object] = {}

    async with Client(server) as client:
        async def call(world: str) -> None:
            results[world] = await client.call_tool("get_weather", {"city": "Oslo"}, meta={"mcp-sim/world": world})

        async with anyio.create_task_group() as group:
            for world in ("first", "second", "third"):  # one runs, one waits, one is refused
                group.start_soon(call, world)
                await anyio.sleep(0.2)
            engine.gate.set()
    refused = [r for r in results.values() if r.is_error]  # type: ignore[attr-defined]
    assert len(refused) == 1
    assert refused[0].meta[META_KEY]["stage"] == "queue" and "busy" in refused[0].content[0].text  # type: ignore[attr-defined]


async def test_the_world_resource_is_only_there_when_asked_for() -> None:
    async with Client(create_server(weather_server(ScriptedEngine(WEATHER)), expose_world=True)) as client:
        await client.call_tool("get_weather", {"city": "Oslo"})
        state = json.loads((await client.read_resource("sim://world")).contents[0].text)  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="unknown resource"):
            await client.read_resource("sim://elsewhere")
    assert state["name"] == "default" and state["calls"] == 1
    async with Client(create_server(weather_server(ScriptedEngine()))) as client:
        assert (await client.list_resources()).resources == []  # every server lists resources, maybe none
        with pytest.raises(MCPError, match="unknown resource"):
            await client.read_resource("sim://world")
