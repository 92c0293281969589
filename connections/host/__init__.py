"""`host.mcp`: what agent code calls during a turn."""
