"""`mcp-sim mirror` against real servers: every schema and annotation verbatim, a spec that loads."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_sim.core.capabilities import DECLARABLE
from mcp_sim.core.simulator import Simulator
from mcp_sim.core.specs import load_catalog
from mcp_sim.fidelity.mirror import fetch_server, invalid_tools, spec_document
from mcp_sim.serving.server import create_server
from tests.conftest import free_port, stop, subprocess_env, wait_for_port
from tests.fidelity_helpers import (
    LINGERING_SERVER,
    PAGED_SERVER,
    everything_server,
    filesystem_server,
    live_tools,
    memory_server,
    run_cli,
    stdio,
    time_server,
)
from tests.scripted import ScriptedEngine


def mirror_to(out: Path, *args: str) -> dict:
    completed = run_cli("mirror", "--out", str(out), *args)
    assert completed.returncode == 0, completed.stderr
    return yaml.safe_load(out.read_text()) if out.suffix != ".json" else json.loads(out.read_text())


@pytest.mark.parametrize("name", ["time", "filesystem", "memory"])
def test_mirror_copies_the_real_tools_verbatim(name: str, tmp_path: Path) -> None:
    command = {"time": time_server(), "filesystem": filesystem_server(tmp_path),
               "memory": memory_server()}[name]
    spec = mirror_to(tmp_path / f"{name}.yaml", "--", *command)
    reference = anyio.run(live_tools, stdio(command))
    inferred = {tool["name"]: tool.pop("x-sim")["state"] for tool in spec["tools"] if "x-sim" in tool}
    assert spec["tools"] == reference  # names, schemas, annotations, execution: all as listed
    # Plus the state effects the names and schemas say (mcp_sim.sources.state_inference); the memory server's
    # tools take many records at once and answer with whole graphs, which no effect describes.
    files = {"read_text_file": {"collection": "files", "op": "read", "key": "path", "at": ""},
             "write_file": {"collection": "files", "op": "create", "key": "path", "at": ""}}
    expected = {"time": {}, "memory": {}, "filesystem": files}[name]
    assert {tool: inferred[tool] for tool in expected} == expected
    assert bool(inferred) == bool(expected)
    expected_server = {"time": "mcp-time", "filesystem": "secure-filesystem-server",
                       "memory": "memory-server"}[name]
    assert spec["server"]["name"] == expected_server
    assert spec["world"]["description"].startswith(expected_server)
    catalog = load_catalog([tmp_path / f"{name}.yaml"])
    assert sorted(catalog.tools) == sorted(tool["name"] for tool in reference)
    loaded = catalog.tools[reference[0]["name"]]
    assert loaded.input_schema == reference[0]["inputSchema"]


async def capabilities_of(target: object) -> dict:
    async with Client(target, mode="legacy") as client:  # type: ignore[arg-type]
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True, mode="json")
        try:
            await client.set_logging_level("info")
            capabilities["setLevel answered"] = True
        except MCPError as exc:
            capabilities["setLevel answered"] = exc.code
        return capabilities


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")
@pytest.mark.parametrize("name", ["everything", "time"])
def test_serve_advertises_the_capabilities_mirror_copied(name: str, tmp_path: Path) -> None:
    # The everything server has logging, completions, subscriptions, listChanged and tasks; the time server
    # lists tools, resources and prompts with none of them.
    command = {"everything": everything_server(), "time": time_server()}[name]
    spec = mirror_to(tmp_path / f"{name}.yaml", "--", *command)
    live = anyio.run(capabilities_of, stdio(command))
    answered = live.pop("setLevel answered")
    assert spec["server"]["capabilities"] == live
    catalog = load_catalog([tmp_path / f"{name}.yaml"])
    served = anyio.run(capabilities_of, create_server(Simulator(catalog, ScriptedEngine())))
    assert served.pop("setLevel answered") == answered  # the time server: -32601, as the real one
    assert served == {key: value for key, value in live.items() if key in DECLARABLE}
    assert (answered is True) == (name == "everything")
    assert name == "everything" or answered == types.METHOD_NOT_FOUND


def test_mirror_over_http_keeps_the_instructions_as_the_world(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(everything_server("streamableHttp"), env=subprocess_env(PORT=str(port)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, server)
        url = f"http://127.0.0.1:{port}/mcp"
        spec = mirror_to(tmp_path / "everything.json", "--url", url)
        reference = anyio.run(live_tools, url)
    finally:
        stop(server)
    for tool in spec["tools"]:
        tool.pop("x-sim", None)  # inferred state effects, checked above
    assert spec["tools"] == reference
    assert len(reference) > 5
    description = spec["world"]["description"]
    assert description.startswith("mcp-servers/everything: ")
    assert "Everything" in description.split(": ", 1)[1]  # the server's instructions, not just its name
    load_catalog([tmp_path / "everything.json"])


def test_mirror_pages_and_refuses_to_write_a_spec_that_would_not_load(tmp_path: Path) -> None:
    out = tmp_path / "paged.yaml"
    refused = run_cli("mirror", "--out", str(out), "--", *PAGED_SERVER)
    assert refused.returncode == 1
    assert "bad_schema" in refused.stderr and "invalid JSON Schema" in refused.stderr
    assert "--skip-invalid" in refused.stderr
    assert not out.exists()

    kept = run_cli("mirror", "--out", str(out), "--skip-invalid", "--", *PAGED_SERVER)
    assert kept.returncode == 0, kept.stderr
    assert "skipped 1 tool(s)" in kept.stderr
    spec = yaml.safe_load(out.read_text())
    # ping is on the first page, boom on the second: mirror followed nextCursor.
    assert [tool["name"] for tool in spec["tools"]] == ["ping", "boom"]
    assert spec["tools"][0]["annotations"] == {"readOnlyHint": True}
    assert spec["world"]["description"] == "paged-test-server: Pages its tools."
    assert {key: spec["server"][key] for key in ("name", "version")} == {"name": "paged-test-server", "version": "1.0"}
    assert "tools" in spec["server"]["capabilities"]  # what the live server advertised, copied


def test_invalid_tools_names_each_rejected_tool_with_the_loaders_reason() -> None:
    document = anyio.run(fetch_server, stdio(PAGED_SERVER))
    problems = invalid_tools(spec_document(document))
    assert list(problems) == ["bad_schema"]
    assert any("/inputSchema/properties/size/type: invalid JSON Schema" in p for p in problems["bad_schema"])


def test_mirror_needs_exactly_one_server() -> None:
    neither = run_cli("mirror")
    assert neither.returncode == 1 and "--url URL, or a command after --" in neither.stderr
    both = run_cli("mirror", "--url", "http://127.0.0.1:9/mcp", "--", "true")
    assert both.returncode == 1 and "not both" in both.stderr


def test_mirror_writes_the_spec_when_the_server_refuses_an_optional_list(tmp_path: Path) -> None:
    # Like mcp-server-sqlite: resources advertised and listed, resources/templates/list "Method not found".
    out = tmp_path / "lingering.yaml"
    completed = run_cli("mirror", "--out", str(out), "--", *LINGERING_SERVER)
    assert completed.returncode == 0, completed.stderr
    assert "resources/templates/list" in completed.stderr and "-32601" in completed.stderr
    spec = yaml.safe_load(out.read_text())
    assert [tool["name"] for tool in spec["tools"]] == ["write_note", "read_note"]
    assert [resource["uri"] for resource in spec["resources"]] == ["memo://insights"]
    assert "resourceTemplates" not in spec
    load_catalog([out])
