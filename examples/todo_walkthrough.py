"""The to-do walkthrough: three creates, a list, a completion, a delete and a last list against
`mcp-sim serve examples/todo.yaml` over streamable HTTP, with the Python SDK's default client.

    .venv/bin/python examples/todo_walkthrough.py          # starts the server with the bundled model
    .venv/bin/python examples/todo_walkthrough.py --url http://127.0.0.1:8765/mcp   # or use a running one
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

SPEC = Path(__file__).resolve().parent / "todo.yaml"
STEPS = [
    ("create_task", {"title": "Write the report"}),
    ("create_task", {"title": "Call the bank"}),
    ("create_task", {"title": "Book the dentist"}),
    ("list_tasks", {}),
    ("complete_task", {"task_id": "T-2"}),
    ("delete_task", {"task_id": "T-3"}),
    ("list_tasks", {}),
]


async def walk(url: str) -> None:
    async with Client(url, read_timeout_seconds=300) as client:  # the SDK's default: stateless, no session
        for name, arguments in STEPS:
            result = await client.call_tool(name, arguments)
            source = (result.meta or {}).get("mcp-sim/simulation", {}).get("source")
            body = result.structured_content if result.structured_content is not None else result.content
            print(f"> {name} {json.dumps(arguments)}  [{'ERROR, ' if result.is_error else ''}answered by {source}]")
            print(f"  {json.dumps(body)}")


def serve() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "mcp_sim", "serve", str(SPEC), "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            if process.poll() is not None:
                raise SystemExit(f"mcp-sim serve exited with {process.returncode}") from None
            time.sleep(0.2)
    process.kill()
    raise SystemExit("mcp-sim serve did not start listening within a minute")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running `mcp-sim serve examples/todo.yaml --transport http` endpoint")
    url = parser.parse_args().url
    process = None
    if url is None:
        process, url = serve()
    try:
        anyio.run(walk, url)
    finally:
        if process is not None:
            process.terminate()
            process.wait()
