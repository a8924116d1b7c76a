"""The git spec over a real MCP client and a real server process with the real model: the repository answers
what it knows (status, commit, log), the model writes the words no example shows (git_reset's), and the
repository still follows the call the model answered."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from mcp_sim.core.simulator import META_KEY
from tests.conftest import subprocess_env

GIT = Path(__file__).resolve().parent.parent / "tool_specs" / "fidelity" / "git.yaml"
REPO = {"repo_path": "/sandbox/repo"}


def test_the_repository_answers_and_the_model_writes_what_no_example_shows() -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("git_add", {"files": ["notes.txt"]}), ("git_status", {}), ("git_reset", {}), ("git_status", {}),
        ("git_add", {"files": ["setup.cfg"]}), ("git_commit", {"message": "Tidy the setup"}),
        ("git_log", {"max_count": 1})]

    async def session() -> list[Any]:
        args = ["-m", "mcp_sim", "serve", str(GIT), "--threads", "2"]
        params = StdioServerParameters(command=sys.executable, args=args, env=subprocess_env())
        async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
            return [await client.call_tool(tool, {**REPO, **arguments}) for tool, arguments in calls]

    results = anyio.run(session)
    texts = [result.content[0].text for result in results]
    sources = [result.meta[META_KEY]["source"] for result in results]
    assert sources == ["state", "state", "model", "state", "state", "state", "state"], texts
    assert texts[0] == "Files staged successfully"
    assert "Changes to be committed:" in texts[1] and "\tnew file:   notes.txt" in texts[1]
    if results[2].is_error:  # the model's answer failed the call: nothing was reset
        assert texts[3] == texts[1]
    else:  # the model's words, the repository's rule: the new file is untracked again
        assert "Changes to be committed:" not in texts[3] and "Untracked files:" in texts[3]
        assert "\tnotes.txt" in texts[3]
    made = texts[5].rsplit(" ", 1)[-1]
    assert texts[5] == f"Changes committed successfully with hash {made}" and len(made) == 40
    assert texts[6].startswith(f"Commit history:\nCommit: {made}\n") and "Message: Tidy the setup" in texts[6]
