"""A small real MCP server over stdio shaped like mcp-server-sqlite and server-redis where they trip clients.

Run as a script; it imports only the SDK. It advertises resources and lists one, but has no resource
templates: resources/templates/list is answered with Method not found (as mcp-server-sqlite and
mcp-server-duckdb answer it). Tools: `write_note` and `read_note` (one note in memory). When its stdin
closes it does not exit, as server-redis does not (its Redis connection keeps it alive): it writes its
process id to the file named by $LINGER_PID_FILE and lingers for a minute, so a test can see who stops it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(name="write_note", description="Store the note.",
               input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
    types.Tool(name="read_note", description="Return the stored note.",
               input_schema={"type": "object", "properties": {}}),
]
NOTE = {"text": ""}


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "write_note":
        NOTE["text"] = str((params.arguments or {}).get("text", ""))
        return types.CallToolResult(content=[types.TextContent(type="text", text="stored")])
    return types.CallToolResult(content=[types.TextContent(type="text", text=NOTE["text"])])


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="memo://insights", name="Insights memo",
                                                               mime_type="text/plain")])


async def main() -> None:
    server = Server("lingering-test-server", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                    on_list_resources=list_resources)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
    pid_file = os.environ.get("LINGER_PID_FILE")
    if pid_file:
        with Path(pid_file).open("w") as handle:
            handle.write(str(os.getpid()))
    time.sleep(60)
