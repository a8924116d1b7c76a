"""Regenerate the fidelity benchmark under tool_specs/traces/ from the real servers.

For each server: `mcp-sim mirror` writes its spec; `mcp-sim record` proxies it while the scripted
agent below runs two sessions, a "train" session (different values) and the "eval" session; and
`mcp-sim learn` teaches the spec from the train session only, so the eval never sees its own answers
in the prompt. Temporary directories are recorded as /sandbox, so the traces hold no machine paths.

    python benchmarks/record_fidelity_traces.py            # all servers
    python benchmarks/record_fidelity_traces.py time       # one

Needs `pip install mcp-server-time` and the npm test peers (`npm ci`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tool_specs" / "traces"
NODE_BIN = REPO / "node_modules" / ".bin"
SANDBOX = "/sandbox"

Call = tuple[str, dict[str, Any]]


def time_server(_: str) -> list[str]:
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


def filesystem_server(workdir: str) -> list[str]:
    return [str(NODE_BIN / "mcp-server-filesystem"), workdir]


def memory_server(_: str) -> list[str]:
    return [str(NODE_BIN / "mcp-server-memory")]


def time_calls(_: str, train: bool) -> list[Call]:
    if train:
        return [("get_current_time", {"timezone": "Europe/Paris"}),
                ("convert_time", {"source_timezone": "America/Los_Angeles", "time": "09:00",
                                  "target_timezone": "Europe/Paris"}),
                ("get_current_time", {"timezone": "Not/AZone"})]
    return [("get_current_time", {"timezone": "UTC"}),
            ("get_current_time", {"timezone": "Asia/Tokyo"}),
            ("convert_time", {"source_timezone": "Europe/London", "time": "16:30",
                              "target_timezone": "Asia/Tokyo"}),
            ("convert_time", {"source_timezone": "America/New_York", "time": "08:15",
                              "target_timezone": "Australia/Sydney"}),
            ("get_current_time", {"timezone": "Mars/Olympus_Mons"})]


def filesystem_calls(root: str, train: bool) -> list[Call]:
    if train:
        return [("list_allowed_directories", {}),
                ("create_directory", {"path": f"{root}/docs"}),
                ("write_file", {"path": f"{root}/docs/readme.md",
                                "content": "# Project\nRun make to build.\n"}),
                ("read_text_file", {"path": f"{root}/docs/readme.md"}),
                ("list_directory", {"path": f"{root}/docs"}),
                ("edit_file", {"path": f"{root}/docs/readme.md",
                               "edits": [{"oldText": "make", "newText": "make all"}]}),
                ("read_text_file", {"path": f"{root}/docs/absent.txt"})]
    # The scenario: write, read back, list, edit, read again (plus a missing file).
    return [("list_allowed_directories", {}),
            ("write_file", {"path": f"{root}/notes.txt", "content": "alpha\nbeta\n"}),
            ("read_text_file", {"path": f"{root}/notes.txt"}),
            ("list_directory", {"path": root}),
            ("edit_file", {"path": f"{root}/notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
            ("read_text_file", {"path": f"{root}/notes.txt"}),
            ("read_text_file", {"path": f"{root}/missing.txt"})]


def memory_calls(_: str, train: bool) -> list[Call]:
    if train:
        return [("create_entities", {"entities": [{"name": "Ada Lovelace", "entityType": "person",
                                                   "observations": ["wrote the first program"]}]}),
                ("add_observations", {"observations": [{"entityName": "Ada Lovelace",
                                                        "contents": ["born in London"]}]}),
                ("open_nodes", {"names": ["Ada Lovelace"]}),
                ("search_nodes", {"query": "program"})]
    return [("create_entities", {"entities": [
                {"name": "Alice", "entityType": "person", "observations": ["works on rockets"]},
                {"name": "Acme", "entityType": "company", "observations": ["builds rockets"]}]}),
            ("create_relations", {"relations": [{"from": "Alice", "to": "Acme",
                                                 "relationType": "works_at"}]}),
            ("add_observations", {"observations": [{"entityName": "Alice", "contents": ["speaks French"]}]}),
            ("open_nodes", {"names": ["Alice"]}),
            ("search_nodes", {"query": "rockets"}),
            ("read_graph", {})]


SERVERS: dict[str, tuple[Callable[[str], list[str]], Callable[[str, bool], list[Call]]]] = {
    "time": (time_server, time_calls),
    "filesystem": (filesystem_server, filesystem_calls),
    "memory": (memory_server, memory_calls),
}


def mcp_sim(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_sim", *args]


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**env, **extra}


async def run_session(name: str, session: str, trace: Path, train: bool) -> None:
    """Play one scripted agent session through `mcp-sim record` in a fresh sandbox."""
    server, calls = SERVERS[name]
    with tempfile.TemporaryDirectory(prefix=f"mcp-sim-{name}-") as scratch:
        root = os.path.realpath(scratch)
        env = child_env(MEMORY_FILE_PATH=str(Path(root) / "memory.jsonl"))
        command = mcp_sim("record", "--out", str(trace), "--session", session,
                          "--replace", f"{root}={SANDBOX}", "--", *server(root))
        async with Client(StdioServerParameters(command=command[0], args=command[1:], env=env),
                          mode="legacy") as agent:
            await agent.list_tools()
            for tool, arguments in calls(root, train):
                result = await agent.call_tool(tool, arguments)
                print(f"  {session} {tool}: {'error' if result.is_error else 'ok'}", file=sys.stderr)


def regenerate(name: str) -> None:
    server, _ = SERVERS[name]
    spec, train, trace = OUT / f"{name}.yaml", OUT / f"{name}.train.jsonl", OUT / f"{name}.jsonl"
    for path in (train, trace):
        path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(mcp_sim("mirror", "--out", str(spec), "--", *server(scratch)), env=child_env(),
                       check=True)
    anyio.run(run_session, name, f"{name}-train", train, True)
    anyio.run(run_session, name, f"{name}-eval", trace, False)
    subprocess.run(mcp_sim("learn", str(train), "--spec", str(spec)), env=child_env(), check=True)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[1:] or list(SERVERS):
        print(f"{name}:", file=sys.stderr)
        regenerate(name)


if __name__ == "__main__":
    main()
