"""Field rules with the real model: the fields the rules compute are pinned in the grammar and the model
writes the rest, over a real MCP client and a real server process (the sequential-thinking spec, whose
every field a rule gives, answers without the model at all)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client, StdioServerParameters

from mcp_sim.core.simulator import META_KEY
from tests.conftest import subprocess_env

FIDELITY = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity"

COUNTER = {
    "server": {"name": "visits"},
    "world": {"description": "A page-visit counter of a small blog."},
    "tools": [{
        "name": "visit",
        "description": "Record a visit to a page and say how many visits the blog has had.",
        "inputSchema": {"type": "object", "properties": {"page": {"type": "string"}}, "required": ["page"]},
        "outputSchema": {"type": "object", "properties": {
            "page": {"type": "string"}, "visits": {"type": "integer"}, "greeting": {"type": "string"}},
            "required": ["page", "visits", "greeting"]},
        "x-sim": {"rules": {"page": {"copy": "page"}, "visits": {"count": "tool"}}},
    }],
}


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    folder = tmp_path_factory.mktemp("ruled")
    counter = folder / "visits.yaml"
    counter.write_text(yaml.safe_dump(COUNTER, sort_keys=False))
    yield [counter, FIDELITY / "sequential-thinking.yaml"]


def test_ruled_fields_are_pinned_and_the_model_writes_the_rest(specs: list[Path]) -> None:
    async def session() -> list[Any]:
        args = ["-m", "mcp_sim", "serve", *map(str, specs), "--threads", "2"]
        params = StdioServerParameters(command=sys.executable, args=args, env=subprocess_env())
        results = []
        async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
            for page in ("/home", "/about", "/home"):
                results.append(await client.call_tool("visit", {"page": page}))
            for number in (1, 2):
                results.append(await client.call_tool("sequentialthinking", {
                    "thought": "check the cache", "thoughtNumber": number, "totalThoughts": 2,
                    "nextThoughtNeeded": number < 2}))
        return results

    results = anyio.run(session)
    visits, thoughts = results[:3], results[3:]
    for result, page, count in zip(visits, ("/home", "/about", "/home"), (1, 2, 3), strict=True):
        assert not result.is_error and result.meta is not None and result.structured_content, result.content
        assert result.meta[META_KEY]["source"] == "model"  # the greeting is the model's
        assert result.structured_content["page"] == page and result.structured_content["visits"] == count
        assert isinstance(result.structured_content["greeting"], str)
    for result, count in zip(thoughts, (1, 2), strict=True):
        assert result.meta is not None and result.meta[META_KEY]["source"] == "rules"
        assert result.structured_content is not None
        assert result.structured_content["thoughtHistoryLength"] == count
