"""Dry-run a small toolchain against simulated tools: list them, call a few in sequence, print the results.

    .venv/bin/python examples/dry_run.py            # starts `mcp-sim serve tool_specs/files.yaml` over stdio
    .venv/bin/python examples/dry_run.py --url http://127.0.0.1:8765/mcp   # or talk to a running HTTP server
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

SPEC = Path(__file__).resolve().parent.parent / "tool_specs" / "files.yaml"
STEPS = [
    ("write_file", {"path": "/reports/q3.md", "content": "# Q3\nRevenue up 12%."}),
    ("read_file", {"path": "/reports/q3.md"}),
    ("list_files", {"prefix": "/reports"}),
    ("delete_file", {"path": "/reports/q3.md"}),
]


async def main(url: str | None) -> None:
    target = url or StdioServerParameters(command=sys.executable, args=["-m", "mcp_sim", "serve", str(SPEC)])
    # No session needed: every call lands in the server's default world (over HTTP, add ?world=NAME to the
    # URL for a world of this run's own), so later calls see earlier ones.
    async with Client(target, read_timeout_seconds=300) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))
        for name, arguments in STEPS:
            result = await client.call_tool(name, arguments)
            simulated = (result.meta or {}).get("mcp-sim/simulation", {})
            body = result.structured_content if result.structured_content is not None else result.content[0].text
            flag = "ERROR " if result.is_error else ""
            print(f"\n> {name}({json.dumps(arguments)})  [{flag}simulated in {simulated.get('latency_ms')} ms]")
            print(json.dumps(body, indent=2) if not isinstance(body, str) else body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running `mcp-sim serve --transport http` endpoint")
    anyio.run(main, parser.parse_args().url)
