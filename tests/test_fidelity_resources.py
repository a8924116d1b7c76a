"""`mirror` and `record` with resources, resource templates and prompts, against the real npm
`@modelcontextprotocol/server-everything`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import mcp_types as types
import yaml
from mcp import Client

from mcp_sim.core.specs import load_catalog
from mcp_sim.rehearsal.traces import PROMPT_GET, RESOURCE_READ, read_traces
from tests.fidelity_helpers import everything_server, recorder, run_cli, stdio

DOC = "demo://resource/static/document/architecture.md"


async def live_surface() -> dict[str, list[dict]]:
    """What server-everything lists besides tools, straight from a client (one page each here)."""
    async with Client(stdio(everything_server()), mode="legacy") as client:
        lists = {"resources": (await client.list_resources()).resources,
                 "resourceTemplates": (await client.list_resource_templates()).resource_templates,
                 "prompts": (await client.list_prompts()).prompts}
    return {key: [item.model_dump(by_alias=True, exclude_none=True, mode="json") for item in items]
            for key, items in lists.items()}


def test_mirror_copies_resources_templates_and_prompts_into_a_spec_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "everything.yaml"
    completed = run_cli("mirror", "--out", str(out), "--", *everything_server())
    assert completed.returncode == 0, completed.stderr
    spec = yaml.safe_load(out.read_text())
    live = anyio.run(live_surface)
    assert spec["resources"] == live["resources"] and len(spec["resources"]) == 7
    assert spec["resourceTemplates"] == live["resourceTemplates"]
    assert [{k: v for k, v in p.items() if k != "messages"} for p in spec["prompts"]] == live["prompts"]
    prompts = {p["name"]: p for p in spec["prompts"]}
    # The real server filled its own text with our placeholders: the spec fills them as it would.
    assert prompts["args-prompt"]["messages"][0]["content"]["text"] == "What's weather in {{city}}, {{state}}?"
    assert "prompt 'resource-prompt': prompts/get refused placeholder arguments" in completed.stderr
    assert "7 resources, 2 resourceTemplates, 4 prompts" in completed.stderr
    surface = load_catalog([out]).spec_sets[0].surface
    assert len(surface.templates) == 2 and surface.templates[0].matcher.match("demo://resource/dynamic/text/5")
    filled = next(p for p in surface.prompts if p.name == "args-prompt").render({"city": "Oslo", "state": "NO"})
    assert filled[0]["content"]["text"] == "What's weather in Oslo, NO?"


def test_record_proxies_resources_and_prompts_and_records_reads_and_gets(tmp_path: Path) -> None:
    trace = tmp_path / "everything.jsonl"

    async def agent() -> tuple[types.ReadResourceResult, types.GetPromptResult, int]:
        async with Client(recorder(trace, everything_server(), "--session", "s1"), mode="legacy") as client:
            listed = len((await client.list_resources()).resources)
            read = await client.read_resource(DOC)
            got = await client.get_prompt("args-prompt", {"city": "Oslo"})
            await client.call_tool("echo", {"message": "hi"})
            return read, got, listed

    read, got, listed = anyio.run(agent)
    assert listed == 7
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [(line.get("kind"), line["tool"], line["step"]) for line in lines] == [
        (RESOURCE_READ, DOC, 1), (PROMPT_GET, "args-prompt", 2), (None, "echo", 3)]  # tool calls as before
    assert lines[0]["arguments"] == {"uri": DOC}
    assert lines[0]["result"]["contents"][0]["text"] == read.contents[0].text  # type: ignore[union-attr]
    assert lines[1]["arguments"] == {"city": "Oslo"}
    assert lines[1]["result"]["messages"][0]["content"]["text"] == got.messages[0].content.text  # type: ignore[union-attr]
    assert [r.tool for r in read_traces([trace])] == ["echo"]  # learn, eval and cassettes see tool calls only
    assert [r.kind for r in read_traces([trace], kinds=None)] == [RESOURCE_READ, PROMPT_GET, "tools/call"]
