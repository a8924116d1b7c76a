"""A small real MCP server over stdio that pages its tools/list and has one tool the spec loader rejects.

Run as a script; it imports only the SDK. Tools: `ping` (page 1), `bad_schema` (page 2, its
inputSchema is not valid JSON Schema), `boom` (page 2, answers tools/call with a JSON-RPC error).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

PAGES = [
    [types.Tool(name="ping", description="Answer pong.", input_schema={"type": "object", "properties": {}},
                annotations=types.ToolAnnotations(read_only_hint=True))],
    [types.Tool(name="bad_schema", description="A property of an unknown type.",
                input_schema={"type": "object", "properties": {"size": {"type": "size"}}}),
     types.Tool(name="boom", description="Always fails with a protocol error.",
                input_schema={"type": "object", "properties": {"password": {"type": "string"}}})],
]


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    page = int(params.cursor) if params and params.cursor else 0
    next_cursor = str(page + 1) if page + 1 < len(PAGES) else None
    return types.ListToolsResult(tools=PAGES[page], next_cursor=next_cursor)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "boom":
        raise MCPError(types.INVALID_PARAMS, "boom refuses every call")
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


async def main() -> None:
    server = Server("paged-test-server", version="1.0", instructions="Pages its tools.",
                    on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
