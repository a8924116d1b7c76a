"""Shared by the fidelity tests: the real servers, the CLI as a subprocess, a scripted agent."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.conftest import REPO, mcp_sim_command, subprocess_env

NODE_BIN = REPO / "node_modules" / ".bin"
TRACES = REPO / "tool_specs" / "traces"
PAGED_SERVER = [sys.executable, str(Path(__file__).parent / "peers" / "paged_server.py")]
# Refuses resources/templates/list and outlives its stdin, as mcp-server-sqlite and server-redis do.
LINGERING_SERVER = [sys.executable, str(Path(__file__).parent / "peers" / "lingering_server.py")]


def time_server() -> list[str]:
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def filesystem_server(root: str | Path) -> list[str]:
    return [str(NODE_BIN / "mcp-server-filesystem"), str(root)]


def memory_server() -> list[str]:
    return [str(NODE_BIN / "mcp-server-memory")]


def everything_server(*args: str) -> list[str]:
    return [str(NODE_BIN / "mcp-server-everything"), *args]


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600
            ) -> subprocess.CompletedProcess[str]:
    """`mcp-sim ARGS` in a child process that imports this checkout."""
    return subprocess.run(mcp_sim_command(*args), env=subprocess_env(**(env or {})), capture_output=True,
                          text=True, timeout=timeout)


def stdio(command: Sequence[str], **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=command[0], args=list(command[1:]), env={**subprocess_env(), **env})


def recorder(trace: Path, server: Sequence[str], *options: str, **env: str) -> StdioServerParameters:
    """The `mcp-sim record` proxy in front of `server`, as an agent would start it."""
    return stdio(mcp_sim_command("record", "--out", str(trace), *options, "--", *server), **env)


async def live_tools(target: StdioServerParameters | str) -> list[dict[str, Any]]:
    """The server's tools as it lists them, straight from a client (the reference for verbatim checks)."""
    async with Client(target, mode="legacy") as client:
        tools: list[types.Tool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
    return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]


def wire(result: types.CallToolResult) -> dict[str, Any]:
    data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    kept = {"content": data["content"]}
    if "structuredContent" in data:
        kept["structuredContent"] = data["structuredContent"]
    kept["isError"] = bool(data.get("isError", False))
    return kept
