"""Connection `notes` (the file name is the name): a local MCP server started as a stdio child.

`advertise_tools=True` gives the model each of its tools by its own name; drop it to reach the
server through the mcp_list_tools / mcp_call_tool meta-tools instead. Every field, and remote
(url=...), OAuth and per-session auth connections: docs/connections.md.
"""

import sys
from pathlib import Path

from connections import define_connection

connection = define_connection(
    command=sys.executable,  # the Python that runs agent-sdk, which has the `mcp` package
    args=[str(Path(__file__).resolve().parents[2] / "servers" / "notes_server.py")],
    advertise_tools=True,
    description="An in-memory notebook (offline, no credentials).",
)
