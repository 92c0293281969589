"""A tiny stdio MCP server for the quickstart: an in-memory notebook. Needs only the `mcp` package.

Replace it with any MCP server: a `command=` connection starts it (docs/clients.md, "Environment of
a stdio server"); or point a connection at a remote one with `url=...`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("quickstart-notes")
_notes: list[str] = []


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def add_note(text: str) -> str:
    """Store a note and return how many notes there are."""
    _notes.append(text)
    return f"stored note #{len(_notes)}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def list_notes() -> list[str]:
    """Every note stored so far, oldest first."""
    return list(_notes)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def word_count(text: str) -> int:
    """How many words `text` has."""
    return len(text.split())


if __name__ == "__main__":
    server.run("stdio")
