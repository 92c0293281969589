"""One upstream MCP client: its session, the fast wires, restarts and what it answers."""
