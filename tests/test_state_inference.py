"""State effects inferred from real tool shapes: the benchmark's mirrored servers, the shipped specs, and
real OpenAPI documents (ReadMe's petstore, the hand-written CRUD document); plus `import openapi` writing them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_sim.core.specs import load_catalog
from mcp_sim.sources.openapi import import_openapi
from mcp_sim.sources.state_inference import infer_state, plural, singular, words
from tests.conftest import SPECS
from tests.test_openapi_import import DATA, npm_package

BENCHMARK = SPECS / "fidelity"


def tools(path: Path) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in yaml.safe_load(path.read_text())["tools"]}


def inferred(path: Path) -> dict[str, dict[str, Any]]:
    return {name: effect for name, tool in tools(path).items() if (effect := infer_state(tool)) is not None}


def test_words_plurals_and_singulars() -> None:
    assert words("getTaskById") == words("get_task_by_id") == words("get-task-by-id") == ["get", "task", "by", "id"]
    assert words("listHTTPRoutes") == ["list", "http", "routes"]
    assert [plural(n) for n in ("task", "entry", "box", "key", "entities", "info")] == [
        "tasks", "entries", "boxes", "keys", "entities", "info"]
    assert [singular(n) for n in ("tasks", "entries", "boxes", "status", "address")] == [
        "task", "entry", "box", "statu", "address"]


def test_the_filesystem_server_writes_and_reads_files_by_path() -> None:
    found = inferred(BENCHMARK / "filesystem.yaml")
    assert found["write_file"] == {"collection": "files", "op": "create", "key": "path", "at": ""}  # a put
    assert found["read_text_file"] == {"collection": "files", "op": "read", "key": "path", "at": ""}
    assert found["edit_file"]["op"] == "update" and found["edit_file"]["key"] == "path"
    # Moving, listing a tree or reading many files at once: no single-record effect says those.
    assert {"move_file", "directory_tree", "read_multiple_files"}.isdisjoint(found)


def test_key_value_and_sql_servers() -> None:
    redis = inferred(BENCHMARK / "redis.yaml")
    assert redis == {"set": {"collection": "items", "op": "update", "key": "key"},
                     "get": {"collection": "items", "op": "read", "key": "key"},
                     "delete": {"collection": "items", "op": "delete", "key": "key"},
                     "list": {"collection": "items", "op": "list", "query": "pattern"}}
    sqlite = inferred(BENCHMARK / "sqlite.yaml")
    assert sqlite["describe_table"] == {"collection": "tables", "op": "read", "key": "name", "argument": "table_name"}
    # SQL text is no record: read_query/write_query/create_table run on the world's database instead.
    for name in ("read_query", "write_query", "create_table"):
        assert sqlite[name] == {"collection": "database", "op": "sql"}
    assert "append_insight" not in sqlite
    git = inferred(BENCHMARK / "git.yaml")
    assert git == {"git_create_branch": {"collection": "branches", "op": "create", "key": "name",
                                         "argument": "branch_name"}}


@pytest.mark.parametrize("name", ["time", "memory", "sequential-thinking"])
def test_servers_whose_tools_name_no_single_record_get_none(name: str) -> None:
    # Clocks, bulk graph edits (`entities: [...]`), a thought log: a wrong effect is worse than none.
    assert inferred(BENCHMARK / f"{name}.yaml") == {}


def test_the_shipped_crm_and_files_specs() -> None:
    crm = inferred(SPECS / "crm.yaml")
    assert crm["get_customer"] == {"collection": "customers", "op": "read", "at": "/customer", "found": "/found"}
    assert crm["create_ticket"] == {"collection": "tickets", "op": "create", "at": "/ticket"}  # via $defs
    assert crm["search_customers"] == {"collection": "customers", "op": "list", "at": "/results", "total": "/total",
                                       "query": "query", "limit": "limit"}
    files = inferred(SPECS / "files.yaml")
    assert files["delete_file"] == {"collection": "files", "op": "delete", "key": "path", "set": {"/deleted": True}}
    assert files["list_files"]["at"] == "/files"
    assert inferred(SPECS / "ops.yaml") == {} and inferred(SPECS / "weather.yaml") == {}


def test_rest_crud_from_a_real_openapi_document() -> None:
    petstore = {t["name"]: t.get("x-sim", {}).get("state") for t in import_openapi(
        npm_package("@readme/oas-examples") / "3.0" / "json" / "petstore.json").document["tools"]}
    assert petstore["getPetById"] == {"collection": "pets", "op": "read", "argument": "petId", "at": ""}
    assert petstore["deletePet"] == {"collection": "pets", "op": "delete", "argument": "petId"}
    assert petstore["updatePetWithForm"] == {"collection": "pets", "op": "update", "argument": "petId"}
    assert petstore["findPetsByStatus"] == {"collection": "pets", "op": "list", "at": "/result"}
    assert petstore["placeOrder"] == {"collection": "orders", "op": "create", "at": ""}
    assert petstore["getUserByName"] == {"collection": "users", "op": "read", "key": "username", "at": ""}
    # A map of counts, a login, bulk creates: no collection of records.
    for name in ("getInventory", "loginUser", "logoutUser", "createUsersWithListInput"):
        assert petstore[name] is None, name
    document = import_openapi(DATA / "openapi30.json").document
    crud = {t["name"]: t.get("x-sim", {}).get("state") for t in document["tools"]}
    assert crud["createOrder"] == {"collection": "orders", "op": "create", "at": ""}
    assert crud["getOrder"] == {"collection": "orders", "op": "read", "at": ""}  # path parameter `id`: the default
    assert crud["cancelOrder"] == {"collection": "orders", "op": "delete"}
    assert crud["getReceipt"] is None  # a PDF below a record


def test_rest_paths_without_a_document() -> None:
    tool = {"name": "anything", "inputSchema": {"type": "object", "properties": {"ticketId": {"type": "string"},
                                                                                 "status": {"type": "string"}}}}
    assert infer_state(tool, "patch", "/v2/tickets/{ticketId}") == {"collection": "tickets", "op": "update",
                                                                    "argument": "ticketId"}
    assert infer_state(tool, "get", "/users/{user_id}/tickets") is None  # a REST list must say where its array is
    listed = {**tool, "outputSchema": {"type": "object", "properties": {"tickets": {"type": "array"},
                                                                        "total": {"type": "integer"}}}}
    assert infer_state(listed, "get", "/users/{user_id}/tickets") == {"collection": "tickets", "op": "list",
                                                                      "at": "/tickets", "total": "/total"}
    assert infer_state(tool, "post", "/tickets/{ticketId}/close") is None  # an action, not CRUD
    assert infer_state(tool, "delete", "/tickets") is None
    github = {"name": "issues_get", "inputSchema": {"type": "object", "properties": {"issue_number": {}}}}
    assert infer_state(github, "get", "/repos/{owner}/{repo}/issues/{issue_number}") == {
        "collection": "issues", "op": "read", "key": "number", "argument": "issue_number"}  # GitHub's `number`


def test_import_openapi_writes_specs_that_load_with_their_state(tmp_path: Path) -> None:
    result = import_openapi(npm_package("@readme/oas-examples") / "3.0" / "json" / "petstore.json")
    out = tmp_path / "petstore.yaml"
    out.write_text(yaml.safe_dump(result.document, sort_keys=False))
    catalog = load_catalog([out])  # the loader reads `x-sim.state` as data
    assert "getPetById" in catalog.tools
    written = yaml.safe_load(out.read_text())
    assert sum(1 for tool in written["tools"] if "state" in tool.get("x-sim", {})) >= 10
