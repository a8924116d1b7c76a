"""Every outcome of a call is settled once, by the simulator: answers, tool failures, failures of the engine and
injected protocol errors alike get the same typed _meta and reach every observer; resources/read takes the
tools/call path, so an injected protocol error on a read is that JSON-RPC error too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.app import assemble
from mcp_sim.base.errors import EngineError
from mcp_sim.base.result import META_KEY, SimulationResult
from mcp_sim.core.calls import Call
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.base import Generation, GenerationRequest
from mcp_sim.rehearsal.setup import RehearsalSettings
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine

FILES = SPECS / "files.yaml"
TODO = "file:///notes/todo.txt"


class Watcher:
    """An observer that keeps what it saw."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, SimulationResult]] = []

    def observed(self, call: Call, result: SimulationResult, source: str) -> None:
        self.seen.append((call.tool.name, source, result))


class BrokenEngine(ScriptedEngine):
    def generate(self, request: GenerationRequest) -> Generation:
        raise EngineError("the GPU fell off the bus")


def with_faults(tmp_path: Path, engine: ScriptedEngine, *rules: dict[str, Any]) -> tuple[Simulator, Watcher]:
    path = None
    if rules:
        path = tmp_path / "faults.yaml"
        path.write_text(yaml.safe_dump({"faults": list(rules)}), encoding="utf-8")
    watcher = Watcher()
    simulator = assemble(load_catalog([FILES]), engine, SimOptions(attempts=1),
                         rehearsal=RehearsalSettings(faults=path), observers=[watcher])
    return simulator, watcher


def test_a_failed_engine_is_settled_and_observed_like_an_answer(tmp_path: Path) -> None:
    simulator, watcher = with_faults(tmp_path, BrokenEngine())
    result = simulator.simulate("read_file", {"path": "/notes/todo.txt"}, world="w")
    assert result.is_error and "the GPU fell off the bus" in result.text
    simulation = result.meta[META_KEY]
    assert (simulation["stage"], simulation["source"], simulation["world"], simulation["turn"]) == \
        ("engine", "engine", "w", 1)
    assert [(tool, source) for tool, source, _ in watcher.seen] == [("read_file", "engine")]


def test_a_protocol_error_is_settled_observed_and_nested_once(tmp_path: Path) -> None:
    simulator, watcher = with_faults(tmp_path, ScriptedEngine(),
                                     {"tool": "*", "kind": "protocol_error", "nth": 1, "code": -32001})
    result = simulator.simulate("read_file", {"path": "/notes/todo.txt"}, world="w")
    assert result.protocol_error is not None and result.protocol_error.code == -32001
    assert [(tool, source) for tool, source, _ in watcher.seen] == [("read_file", "fault")]
    simulation = result.meta[META_KEY]
    assert set(result.meta) == {META_KEY} and META_KEY not in simulation  # nested once, at the edge
    assert [entry["kind"] for entry in simulation["faults"]] == ["protocol_error"]
    assert (simulation["stage"], simulation["turn"], simulation["model"]) == ("fault", 1, "scripted")


def test_refusals_before_the_world_carry_the_same_meta(tmp_path: Path) -> None:
    simulator, watcher = with_faults(tmp_path, ScriptedEngine())
    result = simulator.simulate("read_file", {"path": 7}, world="w")
    simulation = result.meta[META_KEY]
    assert result.is_error and simulation["stage"] == "arguments" and simulation["model"] == "scripted"
    assert simulation["world"] == "w" and "latency_ms" in simulation
    assert not watcher.seen  # nothing was answered in a world


@pytest.mark.anyio
async def test_a_protocol_error_on_a_read_is_that_json_rpc_error(tmp_path: Path) -> None:
    simulator, watcher = with_faults(tmp_path, ScriptedEngine("buy milk\n"),
                                     {"tool": "*", "kind": "protocol_error", "nth": 1, "code": -32001,
                                      "message": "upstream reset"})
    async with Client(create_server(simulator)) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource(TODO)
        again = await client.read_resource(TODO)  # the server goes on: the rule fires on the first read only
    assert (caught.value.error.code, caught.value.error.message) == (-32001, "upstream reset")
    assert caught.value.error.code != types.INTERNAL_ERROR
    assert again.contents[0].text == "buy milk"  # type: ignore[union-attr]
    assert [source for _, source, _ in watcher.seen] == ["fault", "model"]
