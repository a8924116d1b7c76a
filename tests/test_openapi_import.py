"""`import openapi`: hand-written documents for the edge cases, and real ones from npm (GitHub's REST API
description and ReadMe's example documents), served and called through a real client and the real model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli.sources import register
from mcp_sim.core.simulator import META_KEY, SimOptions, Simulator
from mcp_sim.core.specs import load_catalog, validation_error
from mcp_sim.engines.llama import LlamaEngine
from mcp_sim.models.bundled import default_model_path
from mcp_sim.serving.server import create_server
from mcp_sim.sources.openapi import OpenAPIImportError, drop_unloadable, import_openapi, write_spec
from tests.conftest import REPO, mcp_sim_command, subprocess_env

DATA = Path(__file__).parent / "data" / "openapi"
# Where the npm documents are: the checkout's node_modules, else the scratch install used while developing.
NPM_ROOTS = [REPO / "node_modules", Path("/tmp/npm-openapi/node_modules")]


def npm_package(name: str) -> Path:
    for root in NPM_ROOTS:
        if (root / name / "package.json").is_file():
            return root / name
    raise AssertionError(f"npm package {name} is not installed; run `npm install` in {REPO}")


def tools_of(path: Path, **options: Any) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in import_openapi(path, **options).document["tools"]}


def loads(document: dict[str, Any], tmp_path: Path, name: str = "spec.yaml") -> int:
    """Write the spec as the command does and load it with the spec loader; the number of tools."""
    out = tmp_path / name
    write_spec(document, out)
    return len(load_catalog([out]).tools)


# Hand-written documents -------------------------------------------------------------------------------

def test_swagger2_body_form_and_query_parameters_become_one_input_schema(tmp_path: Path) -> None:
    result = import_openapi(DATA / "swagger2.yaml")
    tools = {tool["name"]: tool for tool in result.document["tools"]}
    add = tools["addDog"]
    # The object body is merged into the arguments; its readOnly id is not an input, only an output.
    assert add["inputSchema"]["required"] == ["name"]
    assert set(add["inputSchema"]["properties"]) == {"X-Request-Id", "name", "owner"}
    assert add["inputSchema"]["properties"]["owner"]["type"] == ["string", "null"]  # x-nullable
    assert "id" in add["outputSchema"]["properties"] and add["title"] == "Add a dog"
    limit = tools["listDogs"]["inputSchema"]["properties"]["limit"]
    assert limit == {"type": "integer", "exclusiveMaximum": 100, "default": 20}  # draft 4 flag translated
    # A JSON array response is wrapped so that the outputSchema is an object, as MCP requires.
    listed = tools["listDogs"]["outputSchema"]
    assert listed["type"] == "object" and listed["required"] == ["result"]
    assert listed["properties"]["result"]["type"] == "array"
    upload = tools["uploadPhoto"]["inputSchema"]
    assert upload["properties"]["photo"] == {"type": "string", "format": "binary"} and upload["required"] == [
        "dogId", "photo"]
    assert "outputSchema" not in tools["dogNotes"]  # produces text/plain: a text tool
    assert tools["replaceNotes"]["inputSchema"]["required"] == ["dogId", "body"]  # an array body stays one argument
    assert tools["removeDog"]["annotations"] == {"destructiveHint": True}
    assert tools["listDogs"]["annotations"] == {"readOnlyHint": True}
    assert result.document["world"]["description"].endswith("Base URL: https://kennel.example/v1")
    assert result.warnings == [] and result.skipped == 0 and loads(result.document, tmp_path) == 6


def test_openapi31_type_lists_non_object_responses_and_refs_into_other_files(tmp_path: Path) -> None:
    tools = tools_of(DATA / "openapi31.yaml")
    plant = tools["get_plants_plantId"]
    # The operation's own `verbose` overrides the path's; Authorization headers are not arguments.
    assert plant["inputSchema"]["properties"]["verbose"]["type"] == ["boolean", "null"]
    assert set(plant["inputSchema"]["properties"]) == {"plantId", "verbose", "X-Trace"}
    # schemas/plant.yaml#/Plant refers on to ./tag.json, relative to its own file.
    output = plant["outputSchema"]
    assert output["properties"]["species"] == {"type": "string", "const": "Ficus"}
    assert output["properties"]["tags"]["items"]["required"] == ["label"]
    height = tools["get_plants_plantId_height"]["outputSchema"]
    assert height == {"type": "object", "properties": {"result": {"type": ["number", "null"], "examples": [42.5]}},
                      "required": ["result"]}
    assert tools["head_plants_plantId"]["annotations"] == {"readOnlyHint": True}
    assert "outputSchema" not in tools["head_plants_plantId"]
    assert loads({"tools": list(tools.values())}, tmp_path) == 4


def test_a_recursive_schema_is_cut_with_a_permissive_schema() -> None:
    taxonomy = tools_of(DATA / "openapi31.yaml")["taxonomy"]["outputSchema"]
    child = taxonomy["properties"]["children"]["items"]
    assert child["type"] == "object" and "recursive" in child["description"] and "properties" not in child
    assert validation_error({"name": "Plantae", "children": [{"name": "Ficus", "children": []}]}, taxonomy) is None


def test_openapi30_nullable_example_and_extensions_become_valid_json_schema(tmp_path: Path) -> None:
    tools = tools_of(DATA / "openapi30.json")
    create = tools["createOrder"]
    properties = create["inputSchema"]["properties"]
    assert properties["coupon"] == {"type": ["string", "null"], "enum": ["SPRING", "SUMMER", None]}
    assert properties["gift"]["anyOf"][1] == {"type": "null"}
    assert properties["item"] == {"type": "string", "examples": ["kettle"]}  # x-order dropped
    assert properties["quantity"] == {"type": "integer", "exclusiveMinimum": 0}
    assert "id" not in properties and "secret" in properties  # readOnly out of inputs, writeOnly kept
    assert "secret" not in create["outputSchema"]["properties"]  # ... and out of outputs
    text = json.dumps([{k: v for k, v in tool.items() if k != "x-sim"} for tool in tools.values()])  # x-sim: ours
    assert "x-" not in text and "nullable" not in text and "discriminator" not in text and '"xml"' not in text
    # The success response is `default` here; a vendor +json media type counts as JSON; a PDF does not.
    assert create["outputSchema"]["required"] == ["item", "quantity"]
    assert "outputSchema" in tools["getOrder"] and "outputSchema" not in tools["getReceipt"]
    # A pattern Python's re cannot compile would break every validation of the tool: it is dropped.
    assert tools["getOrder"]["inputSchema"]["properties"]["id"] == {"type": "string", "examples": ["A-1"]}
    assert loads({"tools": list(tools.values())}, tmp_path, "spec.json") == 4


def test_a_bad_pointer_skips_only_its_operation_and_names_it() -> None:
    result = import_openapi(DATA / "bad-pointer.yaml")
    assert [tool["name"] for tool in result.document["tools"]] == ["good"]
    assert result.operations == 2 and result.skipped == 1
    [warning] = result.warnings
    assert "skipped GET /bad" in warning and "'#/components/schemas/Missing' points to nothing" in warning
    assert "bad-pointer.yaml#/paths/~1bad/get/responses/200/content/application~1json/schema" in warning


def test_remote_refs_and_urls_are_refused_clearly(tmp_path: Path) -> None:
    document = tmp_path / "remote.json"
    remote = {"$ref": "https://example.com/schemas.json#/Pet"}
    document.write_text(json.dumps({"openapi": "3.0.3", "info": {"title": "R", "version": "1"}, "paths": {
        "/a": {"get": {"responses": {"200": {"description": "ok"}}}},
        "/b": {"get": {"responses": {"200": {"description": "ok", "content": {
            "application/json": {"schema": remote}}}}}}}}))
    result = import_openapi(document)
    assert [tool["name"] for tool in result.document["tools"]] == ["get_a"]
    assert "https://example.com/schemas.json is not a local file; remote $refs are not fetched" in result.warnings[0]
    with pytest.raises(OpenAPIImportError, match="only local files are imported; download the document first"):
        import_openapi(Path("https://example.com/openapi.yaml"))


def test_bad_documents_are_rejected_naming_the_document_and_the_pointer(tmp_path: Path) -> None:
    cases = {
        "no-title.yaml": ("openapi: 3.0.3\ninfo: {version: '1'}\npaths: {/a: {get: {responses: {'200': "
                          "{description: ok}}}}}\n", r"no-title.yaml is not a valid OpenAPI 3.0 document:\n  - "
                          r".*no-title.yaml#/info: 'title' is a required property"),
        "version.yaml": ("openapi: 4.0.0\ninfo: {title: t, version: '1'}\n", r"version.yaml#/openapi: '4.0.0' is not"),
        "list.yaml": ("- 1\n- 2\n", r"list.yaml#: expected an OpenAPI document"),
        "broken.json": ('{"openapi": "3.0.3",', r"broken.json: not valid JSON"),
        "broken.yaml": ("openapi: [3.0.3\n", r"broken.yaml: not valid YAML"),
        "empty-paths.yaml": ("openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths: {}\n",
                             r"empty-paths.yaml#/paths: the document has no operations"),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(OpenAPIImportError, match=message):
            import_openapi(tmp_path / name)
    with pytest.raises(OpenAPIImportError, match=r"missing\.yaml: cannot read"):
        import_openapi(tmp_path / "missing.yaml")


def test_operations_are_picked_by_tag_and_path_glob() -> None:
    assert set(tools_of(DATA / "swagger2.yaml", tags=["photos"])) == {"uploadPhoto"}
    assert set(tools_of(DATA / "swagger2.yaml", tags=["dogs"], paths=["/dogs/*/notes"])) == {"dogNotes"}
    # `*` stays within a segment, `**` crosses them.
    assert set(tools_of(DATA / "swagger2.yaml", paths=["/dogs/*"])) == {"removeDog"}
    assert set(tools_of(DATA / "swagger2.yaml", paths=["/dogs/**"])) == {
        "uploadPhoto", "dogNotes", "replaceNotes", "removeDog"}
    with pytest.raises(OpenAPIImportError, match=r"no operation matches --tag cats \(of 6\); its tags are: dogs, "
                                                 r"photos"):
        import_openapi(DATA / "swagger2.yaml", tags=["cats"])


def test_names_are_valid_and_unique_and_the_name_option_names_the_server(tmp_path: Path) -> None:
    document = tmp_path / "names.yaml"
    document.write_text("openapi: 3.0.3\ninfo: {title: Names, version: '1'}\npaths:\n"
                        "  /a: {get: {operationId: 'list things/all', responses: {'200': {description: ok}}}}\n"
                        "  /b: {get: {operationId: 'list things/all', responses: {'200': {description: ok}}}}\n")
    result = import_openapi(document, name="things-api")
    assert [tool["name"] for tool in result.document["tools"]] == ["list_things_all", "list_things_all_2"]
    assert result.document["server"] == {"name": "things-api", "version": "1"}


def test_a_tool_the_spec_loader_rejects_is_dropped_with_its_reason() -> None:
    good = {"name": "ok", "inputSchema": {"type": "object"}}
    bad = {"name": "typo", "inputSchema": {"type": "object", "properties": {"a": {"type": "strin"}}}}
    spec = {"world": {"description": "w"}, "tools": [good, bad]}
    warnings = drop_unloadable(spec, "doc.yaml")
    assert spec["tools"] == [good]
    assert len(warnings) == 1 and "dropped tool 'typo', which the spec loader rejects" in warnings[0]
    assert "inputSchema/properties/a/type: invalid JSON Schema" in warnings[0]


# The command ------------------------------------------------------------------------------------------

@click.group()
def cli() -> None:
    """A group like mcp-sim's own, with these commands registered."""


register(cli)


def test_import_command_writes_the_spec_and_prints_warnings_and_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "specs" / "broken.yaml"
    result = CliRunner().invoke(cli, ["import", "openapi", str(DATA / "bad-pointer.yaml"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}: 1 tools (1 skipped)" in result.stdout
    assert "warning: skipped GET /bad" in result.stderr
    assert list(load_catalog([out]).tools) == ["good"]
    picked = CliRunner().invoke(cli, ["import", "openapi", str(DATA / "swagger2.yaml"), "--out",
                                      str(tmp_path / "dogs.json"), "--tag", "dogs", "--path", "/dogs",
                                      "--name", "kennel"])
    assert picked.exit_code == 0 and "2 tools (0 skipped)" in picked.stdout
    assert json.loads((tmp_path / "dogs.json").read_text())["server"]["name"] == "kennel"


def test_import_command_errors_are_one_line_and_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["import", "openapi", "https://example.com/api.yaml", "--out",
                                      str(tmp_path / "x.yaml")])
    assert result.exit_code == 1 and "Error: " in result.stderr and "only local files" in result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "x.yaml").exists()


# Real documents from npm ------------------------------------------------------------------------------

# Documents of @readme/oas-examples 8.2.2 with nothing to call: only webhooks, or no paths at all.
NO_OPERATIONS = {"3.0/json/openapi-workshop/title.json", "3.1/json/webhooks.json", "3.1/yaml/webhooks.yaml"}


def test_every_readme_example_document_converts_or_fails_cleanly() -> None:
    root = npm_package("@readme/oas-examples")
    documents = sorted(p for version in ("2.0", "3.0", "3.1") for p in (root / version).rglob("*")
                       if p.suffix in (".json", ".yaml"))
    failed, tools = set(), 0
    for document in documents:
        try:
            result = import_openapi(document)
        except OpenAPIImportError as exc:
            assert str(document) in str(exc)
            failed.add(document.relative_to(root).as_posix())
            continue
        # import_openapi has loaded the result with the spec loader already (and dropped what it rejects).
        assert result.skipped == len([w for w in result.warnings if "skipped" in w or "dropped" in w])
        tools += len(result.document["tools"])
    assert len(documents) >= 120 and failed <= NO_OPERATIONS and tools > 1000


def test_github_issues_tag_imports_loads_and_serves_through_a_real_client(tmp_path: Path) -> None:
    github = npm_package("@octokit/openapi") / "generated" / "api.github.com.json"
    tagged = sum(1 for item in json.loads(github.read_text())["paths"].values() for op in item.values()
                 if isinstance(op, dict) and "issues" in op.get("tags", []))
    result = import_openapi(github, tags=["issues"])
    assert result.operations == tagged >= 40 and result.skipped == 0, result.warnings[:3]
    assert loads(result.document, tmp_path, "issues.json") == tagged  # JSON: the loader parses 2 MB of YAML slowly
    # One tag's schemas are far too long for a small model's context: serve its label tools.
    labels = import_openapi(github, tags=["issues"], paths=["/repos/*/*/labels/*"])
    out = tmp_path / "labels.yaml"
    write_spec(labels.document, out)
    catalog = load_catalog([out])
    assert set(catalog.tools) == {"issues_get-label", "issues_update-label", "issues_delete-label"}
    simulator = Simulator(catalog, LlamaEngine(default_model_path()), SimOptions(max_tokens=200))

    async def call() -> Any:
        async with Client(create_server(simulator)) as client:
            listed = {tool.name for tool in (await client.list_tools()).tools}
            assert listed == set(catalog.tools)
            return await client.call_tool("issues_get-label", {"owner": "octocat", "repo": "hello-world",
                                                               "name": "bug"})

    answer = anyio.run(call)
    assert not answer.is_error, answer.content
    assert answer.meta[META_KEY]["simulated"] is True
    schema = catalog.tools["issues_get-label"].output_schema
    assert schema is not None and validation_error(answer.structured_content, schema) is None


def test_a_rubrik_sized_document_imports_into_a_spec_that_checks_and_answers(tmp_path: Path) -> None:
    """Regression: a real document's 550 KB info.description (Rubrik's, 454 operations) made a world description
    of ~175k tokens; `check` refused the spec and advised --ctx 262144 for a model trained on 8k."""
    paragraphs = [f"Paragraph {n} of the API guide. " + "Clusters, snapshots and SLA domains are managed here. " * 9
                  for n in range(1000)]
    description = "\n\n".join(paragraphs)
    assert len(description) >= 500_000
    operations = {f"/v1/resource{n}/{{id}}": {"get": {
        "operationId": f"getResource{n}", "summary": f"Read resource {n}",
        "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}}}}}}}
        for n in range(450)}
    document = {"openapi": "3.0.3", "info": {"title": "Cluster API", "version": "1", "description": description},
                "paths": operations}
    source = tmp_path / "cluster.json"
    source.write_text(json.dumps(document))
    out = tmp_path / "cluster.yaml"
    imported = CliRunner().invoke(cli, ["import", "openapi", str(source), "--out", str(out)])
    assert imported.exit_code == 0, imported.output
    world = load_catalog([out]).spec_sets[0].world_description
    assert world.startswith("Cluster API\n\nParagraph 0 of the API guide.")
    assert len(world) < 10_000 and "characters, is left out." in world
    checked = subprocess.run(mcp_sim_command("check", str(out)), env=subprocess_env(), capture_output=True,
                             text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    called = subprocess.run(mcp_sim_command("call", str(out), "--tool", "getResource7", "--args", '{"id": "c-1"}'),
                            env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert called.returncode == 0, called.stdout + called.stderr
    assert called.stdout.strip(), called.stderr
