"""Specs of any size: each spec's prompt measured against --ctx, large ones indexed, impossible ones refused.

Token counts come from the real model's vocabulary (no weights are loaded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from mcp_sim.app import fit_catalog
from mcp_sim.cli import cli
from mcp_sim.core.prompt import INDEX_FIRST_CALL, INDEX_INTRO, compact_definition
from mcp_sim.core.simulator import SimOptions, Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.engines.llama import LlamaEngine
from tests.conftest import SPECS
from tests.scripted import ScriptedEngine


def many_tools(count: int) -> dict[str, Any]:
    """An imported API's shape: many tools, each with a documented input and output schema."""
    item = {"type": "object", "properties": {
        name: {"type": "string", "description": f"The {name} of the item, as the API documents it at length."}
        for name in ("id", "name", "owner", "state", "created_at", "updated_at", "url")},
        "required": ["id", "name"]}
    return {"tools": [{"name": f"resource{n}_get", "description": f"Get resource {n}. It returns the item.",
                       "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}},
                                       "required": ["id"]},
                       "outputSchema": item} for n in range(count)]}


@pytest.fixture(scope="module")
def counter(model_path: Path) -> LlamaEngine:
    return LlamaEngine(model_path, n_ctx=8192)  # only its vocabulary is read


def test_check_reports_each_specs_prompt_size_against_the_context() -> None:
    result = CliRunner().invoke(cli, ["check", str(SPECS)])
    assert result.exit_code == 0, result.output
    crm = next(line for line in result.output.splitlines() if line.startswith(str(SPECS / "crm.yaml")))
    assert "tokens of 6,656 room: fits" in crm and "prompt " in crm
    smaller = CliRunner().invoke(cli, ["check", str(SPECS / "weather.yaml"), "--ctx", "4096"])
    assert "tokens of 2,560 room: fits" in smaller.output


def test_a_spec_that_cannot_fit_is_refused_at_startup_naming_file_size_and_fix(tmp_path: Path) -> None:
    """Regression: check said OK, serve warmed up for minutes, then every call failed with llama_decode's error."""
    spec = tmp_path / "big-world.yaml"
    world = {"description": "Every detail of the world matters. " * 1500}
    spec.write_text(yaml.safe_dump({"world": world, **many_tools(2)}))
    for command in (["serve", str(spec)], ["call", str(spec), "--tool", "resource0_get", "--args", '{"id": "1"}']):
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 1, result.output
        assert f"{spec}: its system prompt takes " in result.output and "Raise --ctx (e.g. --ctx 16384)" in \
            result.output, result.output
    # check knows the default model was trained for 8,192 tokens: it never advises more than that.
    checked = CliRunner().invoke(cli, ["check", str(spec)])
    assert checked.exit_code == 1 and f"{spec}: its system prompt takes " in checked.output
    assert "Raise --ctx" not in checked.output, checked.output
    assert "It would need --ctx 16384, more than the 8,192 tokens the model was trained for: shorten" in \
        checked.output


def test_a_spec_of_many_tools_is_indexed_and_each_call_brings_its_own_definition(counter: LlamaEngine) -> None:
    catalog = load_catalog([SPECS / "weather.yaml"])
    big = tmp_catalog(many_tools(400))
    (fit,) = fit_catalog(big, counter, SimOptions())
    assert fit.layout == "index" and fit.full_tokens > 8192 and fit.tokens < fit.room * 0.6
    assert fit_catalog(catalog, counter, SimOptions())[0].layout == "full"
    engine = ScriptedEngine(*[json.dumps({"id": str(n), "name": "x"}) for n in range(3)], context_size=8192)
    simulator = Simulator(big, engine, SimOptions(attempts=1, expose_prompt=True))
    for n in (7, 350, 7):
        result = simulator.simulate(f"resource{n}_get", {"id": str(n)})
        assert not result.is_error, result.text
    prompts = [request.messages for request in engine.requests]
    system = prompts[-1][0].content
    assert "- resource0_get: Get resource 0" in system and "more tools" in system
    assert '"outputSchema"' not in system  # no definition in the shared system prompt
    last = prompts[-1][-1].content
    assert last.startswith('{"name":"resource7_get"') and last.endswith('{"name": "resource7_get", "arguments": '
                                                                        '{"id": "7"}}')
    assert all(message.content.startswith('{"name": "resource') for message in prompts[-1][1:-1:2])  # history
    # One system prompt for calls of every tool; the world's first call goes without the index (it brings
    # its own definition, and the warm-up reads the index meanwhile).
    assert len({p[0].content for p in prompts[1:]}) == 1
    first = prompts[0][0].content
    assert INDEX_FIRST_CALL in first and "resource0_get" not in first and "more tools" in first
    assert len(first) < len(system) / 5 and first[first.index("# Rules"):] == system[system.index("# Rules"):]
    assert INDEX_INTRO in system
    assert counter.count_text_tokens("\n".join(m.content for m in prompts[-1])) < fit.room + 1024


def test_a_called_tools_definition_is_concise_and_compacted_step_by_step_when_too_large() -> None:
    document = many_tools(1)
    tool_doc = document["tools"][0]
    tool_doc["description"] += "\n\n> [!NOTE]\n> A long note on rate limits, [with a link](https://example.com)."
    tool_doc["inputSchema"]["properties"]["id"]["examples"] = ["r-1", "r-2", "r-3"]
    tool = tmp_catalog(document).spec_sets[0].tools[0]
    concise = json.loads(compact_definition(tool))
    # The first paragraph of the tool's description, the first sentence of each schema's, one example each.
    assert concise["description"] == "Get resource 0. It returns the item."
    assert concise["outputSchema"]["properties"]["name"]["description"] == "The name of the item, as the API " \
                                                                           "documents it at length"
    assert concise["inputSchema"]["properties"]["id"]["examples"] == ["r-1"]
    text = compact_definition(tool)
    without_words = compact_definition(tool, len(text) - 1)
    assert '"The id of' not in without_words and '"outputSchema"' in without_words
    names_only = compact_definition(tool, 80)
    assert json.loads(names_only) == {"name": "resource0_get", "description": "Get resource 0",
                                      "arguments": ["id"]}


def tmp_catalog(document: dict[str, Any]) -> Any:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "api.json"
    path.write_text(json.dumps(document))
    return load_catalog([path])


@pytest.mark.anyio
async def test_tools_list_comes_in_pages_a_client_can_read() -> None:
    """Regression: GitHub's 1,223 tools listed as one 20 MB message; the Python SDK's HTTP client reads 1 MiB."""
    from mcp import Client

    from mcp_sim.serving.server import create_server

    document = many_tools(600)
    for tool in document["tools"]:
        tool["description"] += " Long documentation follows." + " Details." * 250
    catalog = tmp_catalog(document)
    names: list[str] = []
    pages = 0
    async with Client(create_server(Simulator(catalog, ScriptedEngine()))) as client:
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            assert len(page.model_dump_json(by_alias=True)) < 1024 * 1024
            names += [tool.name for tool in page.tools]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
    assert names == list(catalog.tools) and pages >= 3
