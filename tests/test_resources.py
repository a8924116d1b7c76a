"""Resources, resource templates and prompts: checked at load with pointers, served to a real `mcp.Client`
in memory (scripted engine) and over stdio with the real model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mcp_types as types
import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from mcp_sim.base.errors import SpecError
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.serving.server import create_server
from tests.conftest import SPECS, subprocess_env
from tests.scripted import ScriptedEngine

pytestmark = pytest.mark.anyio

FILES, CRM = SPECS / "files.yaml", SPECS / "crm.yaml"
README = "docs://files/README.md"
TODO = "file:///notes/todo.txt"


def load_errors(tmp_path: Path, document: dict) -> list[str]:
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(document))
    with pytest.raises(SpecError) as caught:
        load_catalog([spec])
    return [p.replace(str(spec), "bad.yaml") for p in caught.value.problems]


def test_bad_resources_templates_and_prompts_are_named_with_pointers(tmp_path: Path) -> None:
    problems = load_errors(tmp_path, {
        "resources": [{"uri": "README.md", "name": "readme"},
                      {"uri": "docs://a", "name": "a", "text": "x", "blob": "AAAA"},
                      {"uri": "docs://b", "name": "b", "blob": "not base64!"},
                      {"uri": "docs://a", "name": "again", "mime_type": "text/plain"},
                      {"uri": "sim://world", "name": "mine"},
                      {"uri": "docs://c"}],
        "resourceTemplates": [{"uriTemplate": "docs://{a", "name": "unclosed"},
                              {"uriTemplate": "docs://{a}{b}", "name": "adjacent"},
                              {"uriTemplate": "docs://fixed", "name": "fixed"}],
        "prompts": [{"name": "p", "arguments": [{"name": "x"}, {"name": "x"}, {"name": "has space"}],
                     "messages": [{"role": "user", "content": "{{x}} and {{y}}"}]},
                    {"name": "q"},
                    {"name": "r", "messages": [{"role": "robot", "content": "hi"}]},
                    {"name": "ok", "messages": [{"role": "user", "content": "once"}]},
                    {"name": "ok", "messages": [{"role": "user", "content": "again"}]}]})
    expected = [
        "bad.yaml#/resources/0/uri: 'README.md' is not an absolute URI",
        "bad.yaml#/resources/1: give 'text' or 'blob', not both",
        "bad.yaml#/resources/2/blob: must be base64",
        "bad.yaml#/resources/3: unknown field 'mime_type'",
        "bad.yaml#/resources/5/name: Field required",
        "bad.yaml#/resourceTemplates/0/uriTemplate: not an RFC 6570 URI template",
        "bad.yaml#/resourceTemplates/1/uriTemplate: not an RFC 6570 URI template",
        "bad.yaml#/resourceTemplates/2/uriTemplate: 'docs://fixed' has no {variable}",
        "bad.yaml#/prompts/0/arguments/1/name: argument 'x' is declared twice",
        "bad.yaml#/prompts/0/arguments/2/name: 'has space' must be a name",
        "bad.yaml#/prompts/0/messages/0: placeholder {{y}} names no argument",
        "bad.yaml#/prompts/1/messages: a prompt needs 'messages'",
        "bad.yaml#/prompts/2/messages/0/role: Input should be 'user' or 'assistant'",
        "bad.yaml: resource URI 'sim://world' is the simulator's own",
        "bad.yaml: prompt name 'ok' is already defined in bad.yaml",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), f"{start!r} not in {problems}"


def test_resources_and_prompts_must_be_unique_across_files(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({"resources": [{"uri": "docs://x", "name": "x", "text": "1"}]}))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({"resources": [{"uri": "docs://x", "name": "y", "text": "2"}]}))
    with pytest.raises(SpecError, match=r"b.yaml: resource URI 'docs://x' is already defined in .*a.yaml"):
        load_catalog([tmp_path])


def simulator(engine: ScriptedEngine, **options: object) -> Simulator:
    return Simulator(load_catalog([FILES, CRM]), engine, SimOptions(attempts=1, **options))  # type: ignore[arg-type]


async def test_lists_are_the_spec_entries_and_written_content_comes_back_exactly() -> None:
    declared = yaml.safe_load(FILES.read_text())
    engine = ScriptedEngine()
    async with Client(create_server(simulator(engine), expose_world=True)) as client:
        resources = [r.model_dump(by_alias=True, exclude_none=True) for r in (await client.list_resources()).resources]
        templates = (await client.list_resource_templates()).resource_templates
        prompts = (await client.list_prompts()).prompts
        read = await client.read_resource(README)
    expected = {k: v for k, v in declared["resources"][0].items() if k != "text"}
    assert resources[0] == expected and resources[1]["uri"] == "sim://world"  # the world resource merged in
    assert [t.model_dump(by_alias=True, exclude_none=True) for t in templates] == declared["resourceTemplates"]
    assert [p.name for p in prompts] == ["triage_ticket"] and prompts[0].arguments[0].required is True
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.text == declared["resources"][0]["text"] and content.mime_type == "text/markdown"
    assert engine.requests == []  # written content never asks the model


async def test_prompts_get_fills_the_arguments_and_refuses_missing_ones() -> None:
    async with Client(create_server(simulator(ScriptedEngine()))) as client:
        got = await client.get_prompt("triage_ticket", {"ticket_id": "T-5003", "tone": "formal"})
        with pytest.raises(MCPError, match="needs the argument"):
            await client.get_prompt("triage_ticket", {"tone": "formal"})
        with pytest.raises(MCPError, match="Unknown prompt 'nope'"):
            await client.get_prompt("nope", {})
    text = got.messages[0].content.text  # type: ignore[union-attr]
    assert "Triage support ticket T-5003." in text and "draft a formal reply" in text and "{{" not in text
    assert got.description == "Look a ticket's customer up and propose a priority and an assignee."


async def test_an_unknown_uri_is_a_resource_not_found_error() -> None:
    async with Client(create_server(simulator(ScriptedEngine()))) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("file:relative")
    assert caught.value.code == types.INVALID_PARAMS and "Resource not found" in caught.value.message
    assert caught.value.data == {"uri": "file:relative"}


async def test_a_templated_read_is_a_call_in_the_world_that_later_calls_see() -> None:
    answer = json.dumps({"path": "/notes/todo.txt", "content": "buy milk\n", "found": True})
    engine = ScriptedEngine("buy milk\nfix login bug\n", answer)
    async with Client(create_server(simulator(engine, expose_prompt=True))) as client:
        read = await client.read_resource(TODO, meta={"mcp-sim/world": "w1"})
        call = await client.call_tool("read_file", {"path": "/notes/todo.txt"}, meta={"mcp-sim/world": "w1"})
    content = read.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert content.text == "buy milk\nfix login bug" and content.mime_type == "text/plain"
    assert read.meta is not None and read.meta[META_KEY]["world"] == "w1"
    action = json.dumps({"name": "resources/read", "arguments": {"uri": TODO}})
    assert engine.requests[0].messages[-1].content == action
    assert "# Resources" in engine.requests[0].messages[0].content  # the system prompt names the template
    prompt = call.meta[META_KEY]["prompt"]  # type: ignore[index]
    assert {"role": "user", "content": action} in prompt
    assert {"role": "assistant", "content": "buy milk\nfix login bug"} in prompt


def serve_files(*args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, env=subprocess_env(),
                                 args=["-m", "mcp_sim", "serve", str(FILES), "--max-tokens", "64", *args])


async def test_over_stdio_the_real_model_answers_a_templated_read_and_the_next_call_sees_it() -> None:
    async with Client(serve_files("--expose-prompt"), mode="legacy", read_timeout_seconds=300) as client:
        listed = [r.uri for r in (await client.list_resources()).resources]
        written = (await client.read_resource(README)).contents[0]
        read = await client.read_resource(TODO)
        call = await client.call_tool("read_file", {"path": "/notes/todo.txt"})
    assert listed == [README]
    assert isinstance(written, types.TextResourceContents) and written.text.startswith("# File store\n")
    simulated = read.contents[0]
    assert isinstance(simulated, types.TextResourceContents) and simulated.text.strip()
    assert read.meta is not None and read.meta[META_KEY]["source"] == "model"
    prompt = call.meta[META_KEY]["prompt"]  # type: ignore[index]
    assert {"role": "user", "content": json.dumps({"name": "resources/read", "arguments": {"uri": TODO}})} in prompt
    assert {"role": "assistant", "content": simulated.text} in prompt
