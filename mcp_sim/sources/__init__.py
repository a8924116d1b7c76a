"""Tool specs made from other sources (OpenAPI documents) and installed into MCP clients (Claude Desktop)."""
