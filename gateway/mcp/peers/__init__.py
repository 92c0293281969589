"""What the gateway keeps of its MCP peers: calls in flight, questions, streams, caps."""
