"""`worlds export` and `worlds import` against a real HTTP server that needs no model (fixtures answer)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from click.testing import CliRunner
from mcp import Client

from mcp_sim.cli import cli
from tests.conftest import SPECS, start_http_server, stop

pytestmark = pytest.mark.anyio

OSLO = {"city": "Oslo", "temperature": -3.0, "conditions": "snow", "units": "metric"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    spec = yaml.safe_load((SPECS / "weather.yaml").read_text())
    spec["tools"][0]["x-sim"]["fixtures"] = [{"match": {"city": "Oslo"}, "result": OSLO}]
    path = tmp_path_factory.mktemp("spec") / "weather.yaml"
    path.write_text(yaml.safe_dump(spec))
    process, url = start_http_server(str(path), "--replay-only")
    try:
        yield url
    finally:
        stop(process)


def worlds(*args: str) -> str:
    done = CliRunner().invoke(cli, ["worlds", *args])
    assert done.exit_code == 0, done.output
    return done.output


async def test_export_writes_json_values_and_import_is_its_exact_inverse(server: str, tmp_path: Path) -> None:
    root = server.rsplit("/mcp", 1)[0]
    async with Client(f"{server}?world=origin", read_timeout_seconds=60) as client:
        await client.call_tool("get_weather", {"city": "Oslo"})
        await client.call_tool("get_weather", {"city": "Oslo"})
    exported = json.loads(worlds("export", "origin", "--url", root))
    turns = next(iter(exported["history"].values()))
    # Regression: each action was a JSON string inside the JSON ("action": "{\"name\": ...}").
    assert turns[0]["action"] == {"name": "get_weather", "arguments": {"city": "Oslo"}}
    assert turns[1]["observation"] == OSLO
    saved = tmp_path / "origin.json"
    saved.write_text(json.dumps(exported))
    assert "imported world copy: scenario default, 2 turn(s)" in worlds("import", str(saved), "--name", "copy",
                                                                        "--url", root)
    copied = json.loads(worlds("export", "copy", "--url", root))
    # Inside the server, the imported texts are the very bytes of the origin's (prompts and cache keys use them).
    raw = {name: httpx.get(f"{root}/admin/worlds/{name}").json()["history"] for name in ("origin", "copy")}
    assert raw["copy"] == raw["origin"]
    for key in ("name", "created"):
        exported.pop(key), copied.pop(key)
    assert copied == exported
    again = CliRunner().invoke(cli, ["worlds", "import", str(saved), "--name", "copy", "--url", root])
    assert again.exit_code == 1 and "exists already and has a history" in again.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x", "scenario": "default", "history": {"f": [{"action": 1}]}}')
    refused = CliRunner().invoke(cli, ["worlds", "import", str(broken), "--url", root])
    assert refused.exit_code == 1 and "history/f/0" in refused.output
