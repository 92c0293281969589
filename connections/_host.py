"""`host.mcp`: the connection registry that agent code and authored server tools call.

It sees every connection, host-only ones included, and always calls with the definition's
static headers (plus the host OAuth provider's token), never a session's `auth` headers: a server
tool runs for the deployment, not as a tenant. It routes each name to where the connection
lives: the `ClientPool` (stdio, HTTP, SSE) or `AccountConnections` (account connections).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp.types as mt
from mcp_types import LoggingLevel

from ._account import AccountConnections
from ._exceptions import UnknownConnection
from ._host_handlers import ElicitationHandler, SamplingHandler, with_handlers
from ._host_notices import LogCallback, ProgressCallback, with_notices
from ._pool import ClientPool
from ._session_runner import ConnectionStatus
from ._tool_results import as_call_tool_result

__all__ = ["HostMcp"]


class HostMcp:
    """`host.mcp`: `names()`, `await list_tools(name)`, `await call_tool(name, tool, args)`."""

    def __init__(self, pool: ClientPool, accounts: AccountConnections | None = None) -> None:
        self._pool = pool
        self._accounts = accounts

    def names(self) -> list[str]:
        """Every connection's name (host-only connections included), sorted."""
        return sorted([*self._pool.names(), *(self._accounts.names() if self._accounts is not None else [])])

    def _route(self, name: str) -> ClientPool | AccountConnections:
        if self._accounts is not None and self._accounts.serves(name):
            return self._accounts
        if not self._pool.serves(name):
            raise UnknownConnection(name, f"no such connection (defined: {', '.join(self.names()) or 'none'})")
        return self._pool

    def status(self, name: str) -> ConnectionStatus:
        """Whether `name` is idle, open or paused. Raises `UnknownConnection`."""
        return self._route(name).status(name)

    def restart(self, name: str) -> None:
        """Close `name`'s pooled session and clear its restart pause; the next use reopens it.

        Raises `UnknownConnection`, or `ValueError` for an account connection (its hub sessions reopen by themselves).
        """
        route = self._route(name)
        if not isinstance(route, ClientPool):
            raise ValueError(f"connection {name!r} is an account connection: its hub sessions reopen by themselves")
        route.restart(name)

    async def list_tools(self, name: str, *, use_cache: bool = False) -> list[mt.Tool]:
        """The connection's tools (allow/deny lists applied).

        Raises `UnknownConnection`, `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`.
        """
        return await self._route(name).list_tools(name, use_cache=use_cache)

    async def call_tool(
        self,
        name: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        on_log: LogCallback | None = None,
        log_level: LoggingLevel = "info",
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
    ) -> mt.CallToolResult:
        """Call one tool; an `isError` result is returned as is.

        `on_progress` hears the upstream's progress on this call; `on_log` its log messages at or above
        `log_level` (and the connection's `min_log_level`); both as `mcp.Client` callbacks
        (`_host_notices.py`). `elicitation` and `sampling` answer the upstream's requests for input during
        this call (either protocol generation; `_host_handlers.py`, docs/clients.md): without one, the
        upstream learns this call cannot answer it. The pool keeps results as JSON; this is where they
        become the SDK's `CallToolResult`. Raises `UnknownConnection`, `UnknownTool`, `UpstreamError`,
        `UpstreamTimeout`, `ConnectionUnavailable`.
        """
        route = self._route(name)
        if on_progress is None and on_log is None:
            if elicitation is None and sampling is None:
                return as_call_tool_result(await route.call_tool(name, tool, args))
            with with_handlers(elicitation=elicitation, sampling=sampling):
                return as_call_tool_result(await route.call_tool(name, tool, args))
        async with with_notices(on_progress, on_log, log_level):
            with with_handlers(elicitation=elicitation, sampling=sampling):
                return as_call_tool_result(await route.call_tool(name, tool, args))

    def __repr__(self) -> str:
        return f"HostMcp(connections={self.names()})"
