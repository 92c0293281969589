"""The `tasks` capability `/v1/mcp/tools` declares at the handshake versions (MCP 2025-11-25), and the server that does.

Declared: task-augmented `tools/call` and `tasks/cancel` (`gateway/mcp/tasks.py` serves them, with `tasks/get` and
`tasks/result`). Not declared: `tasks.list` (refused, see `gateway/mcp/tasks.py`). At 2026-07-28 the extension
`io.modelcontextprotocol/tasks` is declared instead (`gateway/mcp/task_ext.py`).

The same server says which change notifications it sends: where the gateway relays its upstreams'
changes to handshake-era peers (their GET stream, `gateway/mcp/peers/streams.py`), `listChanged` is true for tools,
resources and prompts, so a client's auto-refresh (the TypeScript SDK's `listChanged` option) acts on them.
(At 2026-07-28 the SDK derives the flags from the `subscriptions/listen` handler itself.)

At 2026-07-28 a `tasks/*` request that does not declare the extension is refused with the SDK's own
`require_client_extension` (-32021, `requiredCapabilities`) wherever the SDK answers it (`serve --stdio`);
on HTTP the lane's tasks bridge (`gateway/mcp/task_ext.py`) answers the same.
"""

from __future__ import annotations

from typing import Any

import mcp_types as mt
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import require_client_extension
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
        self.middleware.append(_TasksNeedTheExtension())

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


class _TasksNeedTheExtension(ServerMiddleware[Any]):
    """At 2026-07-28, a `tasks/*` request from a peer that did not declare `TASKS_EXTENSION` is -32021 (module
    docstring), not "method not found" nor an unknown task."""

    only_methods = frozenset({"tasks/get", "tasks/result", "tasks/cancel", "tasks/update"})
    """It acts on these alone: the `/v1/mcp/tools` lane (`gateway/mcp/lane.py`) still answers `tools/*` itself."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method in self.only_methods and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            require_client_extension(ctx, TASKS_EXTENSION)
        return await call_next(ctx)
