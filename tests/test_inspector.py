"""The MCP Inspector CLI (a real TypeScript client, from npm) drives `mcp-sim serve` over stdio."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, SPECS, subprocess_env

INSPECTOR = REPO / "node_modules" / ".bin" / "mcp-inspector"


def inspector(*args: str) -> dict:
    assert INSPECTOR.exists(), "run `npm ci` (the .ci/run script does) to install the Inspector"
    command = [str(INSPECTOR), "--cli", sys.executable, "-m", "mcp_sim", "serve", str(SPECS / "crm.yaml"), *args]
    completed = subprocess.run(command, env=subprocess_env(), capture_output=True, text=True, timeout=300,
                               stdin=subprocess.DEVNULL, cwd=REPO)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout)


def test_inspector_lists_the_tools() -> None:
    listed = inspector("--method", "tools/list")
    assert [tool["name"] for tool in listed["tools"]] == [
        "get_customer", "search_customers", "create_ticket", "list_tickets"]
    assert listed["tools"][0]["outputSchema"]["$defs"]["Customer"]["properties"]["email"]["format"] == "email"


def test_inspector_calls_a_tool_and_accepts_the_structured_result() -> None:
    result = inspector("--method", "tools/call", "--tool-name", "get_customer", "--tool-arg", "customer_id=C-1002")
    assert result.get("isError") is not True, result
    assert result["_meta"]["mcp-sim/simulation"]["simulated"] is True
    assert isinstance(result["structuredContent"]["found"], bool)
