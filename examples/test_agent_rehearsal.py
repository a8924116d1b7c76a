"""An agent's test that replays its simulated world from a cache: on CI no model is needed or loaded.

    MCP_SIM_RECORD=1 pytest examples/test_agent_rehearsal.py   # once, with the model: fills the cache
    pytest examples/test_agent_rehearsal.py                     # CI: --replay-only, every answer from the cache

Commit orders.cache.db. A call the cache does not hold fails the test with a "Replay miss" result naming
it, so a changed agent, spec or prompt shows up as a failure rather than as new, unreviewed answers.
From a checkout where mcp-sim is not installed, add `-p mcp_sim.pytest_plugin`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
SPEC = HERE / "orders.yaml"
CACHE = HERE / "orders.cache.db"
RECORD = os.environ.get("MCP_SIM_RECORD") == "1"


async def refund_late_orders(client: Any, order_ids: list[str]) -> list[str]:
    """The agent under test: refund every delayed order, and nothing else."""
    refunded = []
    for order_id in order_ids:
        order = await client.call_tool("get_order", {"order_id": order_id})
        assert not order.is_error, order.content[0].text
        if order.structured_content["status"] == "delayed":
            await client.call_tool("issue_refund", {"order_id": order_id, "reason": "late delivery"})
            refunded.append(order_id)
    return refunded


@pytest.mark.anyio
async def test_the_agent_refunds_exactly_the_delayed_orders(mcp_sim: Any, tmp_path: Path) -> None:
    # Replay from a copy: a replay writes the model file's fingerprint into the cache when the file is here.
    cache = CACHE if RECORD else shutil.copy(CACHE, tmp_path / CACHE.name)
    async with mcp_sim(SPEC, cache=cache, replay_only=not RECORD, max_tokens=64) as client:
        refunded = await refund_late_orders(client, ["A-1", "B-2", "C-3"])
    looked_up = mcp_sim.journal.calls_of("get_order")
    delayed = [entry.arguments["order_id"] for entry in looked_up if entry.structured["status"] == "delayed"]
    assert refunded == delayed and "A-1" in refunded  # A-1 is pinned as delayed by a fixture in the spec
    assert not any(entry.is_error for entry in mcp_sim.journal)
    assert mcp_sim.journal[0].source == "fixture"
    if not RECORD:
        assert set(mcp_sim.journal.sources()) == {"fixture", "cache"}
