"""mcp-sim: an MCP server whose tools are simulated by a local GGUF world model."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("mcp-sim")
except PackageNotFoundError:  # run from a checkout that was never installed
    __version__ = "0+unknown"
