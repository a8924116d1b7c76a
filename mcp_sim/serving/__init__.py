"""The MCP layer over the core: the server, transports, the HTTP guard, admin, warm-up, scheduling."""
