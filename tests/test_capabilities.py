"""A spec's `server.capabilities` is what the server advertises, through a real MCP client in-process (no
model); a spec that declares none has every feature."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.base.errors import SpecError
from mcp_sim.core.simulator import Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.serving.server import create_server
from tests.scripted import ScriptedEngine

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

TOOL = "tools: [{name: ping, inputSchema: {type: object}}]\n"


def served(tmp_path: Path, text: str, list_changed: bool = False) -> Client:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return Client(create_server(Simulator(load_catalog([path]), ScriptedEngine()), list_changed=list_changed),
                  mode="legacy")


async def test_a_spec_declares_what_its_server_has(tmp_path: Path) -> None:
    text = "server: {name: lean, capabilities: {tools: {}, experimental: {vendor/trace: {level: 2}}}}\n" + TOOL
    async with served(tmp_path, text) as client:
        capabilities = client.server_capabilities
        assert capabilities.experimental == {"vendor/trace": {"level": 2}}
        assert (capabilities.logging, capabilities.completions, capabilities.resources, capabilities.prompts) == (
            None, None, None, None)
        for call in (lambda: client.set_logging_level("info"), client.list_resources, client.list_prompts,
                     lambda: client.complete(types.PromptReference(name="p"), {"name": "a", "value": ""})):
            with pytest.raises(MCPError) as refused:
                await call()
            assert refused.value.code == types.METHOD_NOT_FOUND
        assert [tool.name for tool in (await client.list_tools()).tools] == ["ping"]


async def test_a_spec_that_declares_nothing_has_every_feature_and_reload_adds_list_changed(tmp_path: Path) -> None:
    async with served(tmp_path, TOOL, list_changed=True) as client:
        capabilities = client.server_capabilities
        assert capabilities.logging is not None and capabilities.completions is not None
        assert capabilities.resources == types.ResourcesCapability(subscribe=True, list_changed=True)
        assert capabilities.tools == types.ToolsCapability(list_changed=True)
        await client.set_logging_level("info")


def test_a_malformed_capability_is_named(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("server: {name: x, capabilities: {logging: yes, tools: {listChanged: sometimes}}}\n" + TOOL)
    with pytest.raises(SpecError) as failed:
        load_catalog([path])
    assert f"{path}#/server/capabilities/logging: must be a mapping" in str(failed.value)
    assert "capabilities/tools/listChanged: must be true or false" in str(failed.value)
