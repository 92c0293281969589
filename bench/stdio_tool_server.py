"""A small Python MCP server over stdio with one tool named by its argument (for bench_many_stdio.py).

    python stdio_tool_server.py TOOL_NAME

Each start appends a line to `$COUNT_FILE`, so the benchmark can count children started.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer


def main() -> None:
    name = sys.argv[1]
    if os.environ.get("COUNT_FILE"):
        with open(os.environ["COUNT_FILE"], "a", encoding="utf-8") as f:
            f.write(f"start {name} {os.getpid()}\n")
    server = MCPServer(f"bench-{name}", log_level="WARNING")

    def tool(text: str) -> str:
        return text

    server.add_tool(tool, name=name, description=f"echo, as {name}")
    server.run("stdio")


if __name__ == "__main__":
    main()
