"""The `tasks` capability `/v1/mcp/tools` declares at the handshake versions (MCP 2025-11-25), and the server that does.

Declared: task-augmented `tools/call` and `tasks/cancel` (`mcp_tasks.py` serves them, with `tasks/get` and
`tasks/result`). Not declared: `tasks.list` (refused, see `mcp_tasks.py`). At 2026-07-28 the extension
`io.modelcontextprotocol/tasks` is declared instead (`mcp_task_ext.py`).
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
from mcp.server.lowlevel import Server

__all__ = ["TASKS_CAPABILITY", "TASKS_EXTENSION", "TaskServer"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

TASKS_CAPABILITY = mt.ServerTasksCapability(
    cancel=mt.TasksCancelCapability(),
    requests=mt.ServerTasksRequestsCapability(tools=mt.TasksToolsCapability(call=mt.TasksCallCapability())),
)


class TaskServer(Server[Any]):
    """An SDK `Server` whose capabilities include `TASKS_CAPABILITY` (the SDK derives the rest from its handlers)."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> mt.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        capabilities.tasks = TASKS_CAPABILITY
        # 2026-07-28: tasks are the `io.modelcontextprotocol/tasks` extension (`mcp_task_ext.py`).
        capabilities.extensions = {**(capabilities.extensions or {}), TASKS_EXTENSION: {}}
        return capabilities
