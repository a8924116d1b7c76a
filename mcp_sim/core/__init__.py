"""The simulator core, which knows nothing of MCP: specs, worlds, calls, prompts, answers."""
