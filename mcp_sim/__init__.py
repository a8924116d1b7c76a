"""mcp-sim: an MCP server whose tools are simulated by a local GGUF world model."""

__version__ = "0.1.0"
