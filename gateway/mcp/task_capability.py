"""The `tasks` capability `/v1/mcp/tools` declares at the handshake versions (MCP 2025-11-25), and the server that does.

Declared: task-augmented `tools/call` and `tasks/cancel` (`gateway/mcp/tasks.py` serves them, with `tasks/get` and
`tasks/result`). Not declared: `tasks.list` (refused, see `gateway/mcp/tasks.py`). At 2026-07-28 the extension
`io.modelcontextprotocol/tasks` is declared instead (`gateway/mcp/task_ext.py`).

The same server says which change notifications it sends: where the gateway relays its upstreams'
changes to handshake-era peers (their GET stream, `gateway/mcp/peers/streams.py`), `listChanged` is true for tools,
resources and prompts, so a client's auto-refresh (the TypeScript SDK's `listChanged` option) acts on them.
(At 2026-07-28 the SDK derives the flags from the `subscriptions/listen` handler itself.)
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
from mcp.server.lowlevel import Server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["TASKS_CAPABILITY", "TASKS_EXTENSION", "TaskServer"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

TASKS_CAPABILITY = mt.ServerTasksCapability(
    cancel=mt.TasksCancelCapability(),
    requests=mt.ServerTasksRequestsCapability(tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())),
)


class TaskServer(Server[Any]):
    """An SDK `Server` whose capabilities include `TASKS_CAPABILITY` (the SDK derives the rest from its handlers),
    and, with `relays_changes`, `listChanged` at the handshake versions (module docstring)."""

    def __init__(self, *args: Any, relays_changes: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.relays_changes = relays_changes

    def get_capabilities(self, *args: Any, **kwargs: Any) -> mt.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if self.relays_changes and kwargs.get("protocol_version") not in MODERN_PROTOCOL_VERSIONS:
            for listing in (capabilities.tools, capabilities.resources, capabilities.prompts):
                if listing is not None:
                    listing.list_changed = True
        capabilities.tasks = TASKS_CAPABILITY
        # 2026-07-28: tasks are the `io.modelcontextprotocol/tasks` extension (`gateway/mcp/task_ext.py`).
        capabilities.extensions = {**(capabilities.extensions or {}), TASKS_EXTENSION: {}}
        return capabilities
