"""`serve --reload`: a real server subprocess (no model: --replay-only and fixtures) and the real MCP client.
An edited spec is served without a restart and the client hears list_changed; a spec that breaks is reported
(stderr and a log notification) while the old one keeps serving."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.subscriptions import ToolsListChanged

from tests.conftest import mcp_sim_command, start_http_server, stop, subprocess_env

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

FIRST = """
tools:
  - name: alpha
    description: The first tool.
    inputSchema: {type: object}
    x-sim: {fixtures: [{match: {}, result: "A"}]}
"""
SECOND = FIRST + """
  - name: beta
    description: Added while the server runs.
    inputSchema: {type: object}
    x-sim: {fixtures: [{match: {}, result: "B"}]}
prompts:
  - name: greet
    messages: [{role: user, content: Hello.}]
"""
BROKEN = "tools: [{name: "


class Heard:
    """What the client was told outside its requests."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def on_message(self, message: Any) -> None:
        self.messages.append(message)

    def kinds(self) -> list[type]:
        return [type(m) for m in self.messages if not isinstance(m, Exception)]

    async def wait_for(self, kind: type, timeout: float = 15.0) -> None:
        with anyio.fail_after(timeout):
            while kind not in self.kinds():
                await anyio.sleep(0.05)


async def edit_and_check(client: Client, heard: Heard, spec: Path) -> str:
    """Run the reload story against a connected client; the error text the client was told."""
    capabilities = client.server_capabilities
    assert capabilities.tools is not None and capabilities.tools.list_changed is True
    assert capabilities.prompts is not None and capabilities.prompts.list_changed is True
    assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha"]

    spec.write_text(SECOND)
    await heard.wait_for(types.ToolListChangedNotification)
    await heard.wait_for(types.PromptListChangedNotification)
    assert types.ResourceListChangedNotification not in heard.kinds()  # the resource list did not change
    assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha", "beta"]
    result = await client.call_tool("beta", {})  # answered by the new spec's fixture
    assert [block.text for block in result.content if isinstance(block, types.TextContent)] == ["B"]
    assert [prompt.name for prompt in (await client.list_prompts()).prompts] == ["greet"]

    spec.write_text(BROKEN)
    await heard.wait_for(types.LoggingMessageNotification)
    log = next(m for m in heard.messages if isinstance(m, types.LoggingMessageNotification))
    assert log.params.level == "error" and log.params.logger == "mcp-sim/reload"
    assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha", "beta"]  # the old spec serves
    result = await client.call_tool("alpha", {})
    assert not result.is_error
    return str(log.params.data)


async def test_http_serves_an_edited_spec_and_tells_the_session(tmp_path: Path) -> None:
    spec = tmp_path / "tools.yaml"
    spec.write_text(FIRST)
    process, url = start_http_server(str(spec), "--reload", "--replay-only")
    try:
        heard = Heard()
        # A stateless 2026-07-28 client listens (subscriptions/listen) beside the 2025-11-25 session.
        async with Client(url) as modern, modern.listen(tools_list_changed=True) as subscription, \
                Client(url, mode="legacy", message_handler=heard.on_message) as client:
            assert modern.server_capabilities.tools is not None and modern.server_capabilities.tools.list_changed
            told = await edit_and_check(client, heard, spec)
            with anyio.fail_after(10):
                assert isinstance(await anext(aiter(subscription)), ToolsListChanged)
        assert f"{spec}: not valid YAML" in told and "still serving" in told
        port = url.split(":")[2].split("/")[0]
        log = sorted(Path(tempfile.gettempdir()).glob(f"mcp-sim-serve-{port}-*.log"))[-1].read_text()
        assert "reloaded 2 tool(s)" in log and f"{spec}: not valid YAML" in log
    finally:
        stop(process)


async def test_stdio_serves_an_edited_spec_and_tells_the_client(tmp_path: Path) -> None:
    spec = tmp_path / "tools.yaml"
    spec.write_text(FIRST)
    command = mcp_sim_command("serve", str(spec), "--reload", "--replay-only")
    target = StdioServerParameters(command=command[0], args=command[1:], env=subprocess_env())
    heard = Heard()
    with (tmp_path / "stderr").open("w") as errors:
        async with Client(stdio_client(target, errlog=errors), mode="legacy",
                          message_handler=heard.on_message) as client:
            told = await edit_and_check(client, heard, spec)
    assert "not valid YAML" in told
    assert "not valid YAML" in (tmp_path / "stderr").read_text()


async def test_without_reload_nothing_is_watched(tmp_path: Path) -> None:
    spec = tmp_path / "tools.yaml"
    spec.write_text(FIRST)
    command = mcp_sim_command("serve", str(spec), "--replay-only")
    target = StdioServerParameters(command=command[0], args=command[1:], env=subprocess_env())
    async with Client(target, mode="legacy") as client:
        assert client.server_capabilities.tools is not None and not client.server_capabilities.tools.list_changed
        spec.write_text(SECOND)
        await anyio.sleep(2.5)
        assert [tool.name for tool in (await client.list_tools()).tools] == ["alpha"]

