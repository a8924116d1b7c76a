"""The CI recipe as CI runs it, on a machine without the model: the example's committed cache answers
`mcp-sim serve --replay-only` over stdio and the example agent test, and an unrecorded call fails loudly."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from mcp_sim.core.simulator import META_KEY
from tests.conftest import REPO, subprocess_env
from tests.test_pytest_plugin import plugin_args

EXAMPLES = REPO / "examples"
NO_MODEL = [sys.executable, str(REPO / "tests" / "no_model_mcp_sim.py")]
# The example agent's calls, in the order it made them when the cache was recorded.
RECORDED = [("get_order", {"order_id": "A-1"}), ("issue_refund", {"order_id": "A-1", "reason": "late delivery"}),
            ("get_order", {"order_id": "B-2"}), ("get_order", {"order_id": "C-3"})]


async def replay(cache: Path) -> list[Any]:
    params = StdioServerParameters(
        command=NO_MODEL[0], args=[*NO_MODEL[1:], "serve", str(EXAMPLES / "orders.yaml"), "--cache", str(cache),
                                   "--replay-only", "--max-tokens", "64"], env=subprocess_env())
    async with Client(params) as client:
        return [await client.call_tool(name, arguments) for name, arguments in
                [*RECORDED, ("get_order", {"order_id": "D-4"})]]


@pytest.mark.anyio
async def test_serve_replay_only_answers_a_recorded_run_with_no_model_on_the_machine(tmp_path: Path) -> None:
    cache = Path(shutil.copy(EXAMPLES / "orders.cache.db", tmp_path / "orders.cache.db"))
    results = await replay(cache)
    sources = [result.meta[META_KEY]["source"] for result in results]
    assert sources == ["fixture", "cache", "cache", "cache", "miss"]
    assert all(not result.is_error for result in results[:4])
    assert results[0].structured_content == {"order_id": "A-1", "status": "delayed", "total": 120.5}
    assert "Replay miss: tool 'get_order' with arguments {\"order_id\": \"D-4\"}" in results[4].content[0].text
    again = await replay(cache)  # and again: the same bytes
    assert [r.model_dump_json(exclude={"meta"}) for r in again] == [r.model_dump_json(exclude={"meta"})
                                                                    for r in results]


def test_the_example_agent_test_passes_from_its_committed_cache() -> None:
    outcome = subprocess.run([sys.executable, "-m", "pytest", str(EXAMPLES / "test_agent_rehearsal.py"),
                              *plugin_args(), "-q", "-p", "no:cacheprovider"], cwd=REPO, env=subprocess_env(),
                             capture_output=True, text=True, timeout=120)
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    assert "1 passed" in outcome.stdout
