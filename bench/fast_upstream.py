"""A fast MCP upstream for benchmarks: an `mcp` 2.x `MCPServer` with one `echo` tool, stateless, JSON answers.

    python bench/fast_upstream.py PORT

It speaks 2026-07-28 and the handshake versions (what every `mcp` 2.x server does), answers each
POST with one JSON body, and spends little CPU per call, so a hop in front of it shows its own cost.
"""

from __future__ import annotations

import sys

from mcp.server import MCPServer

server = MCPServer("fast-upstream", log_level="WARNING")


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


if __name__ == "__main__":
    server.run(
        transport="streamable-http",
        host="127.0.0.1",
        port=int(sys.argv[1]),
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
    )
