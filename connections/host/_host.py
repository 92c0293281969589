"""`host.mcp`: the connection registry that agent code and authored server tools call.

It sees every connection, host-only ones included, and always calls with the definition's
static headers (plus the host OAuth provider's token), never a session's `auth` headers: a server
tool runs for the deployment, not as a tenant. It routes each name to where the connection
lives: the `ClientPool` (stdio, HTTP, SSE) or `AccountConnections` (account connections).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, overload

import mcp_types as mt
from mcp_types import LoggingLevel

from .._exceptions import UnknownConnection
from ..account._account import AccountConnections
from ..client._clients import OpenedClient
from ..client._session_runner import ConnectionStatus
from ..client._tasks import ToolTask
from ..client._tool_results import as_call_tool_result
from ..client._upstream_changes import resource_subscription
from ..client._warm import WarmProgress
from ..pool._offer_calls import ListMethod, complete, get_prompt, list_every_page, read_resource
from ..pool._pool import ClientPool
from ..pool._principal_grants import PrincipalCalls
from ._host_handlers import ElicitationHandler, SamplingHandler, with_handlers
from ._host_notices import LogCallback, ProgressCallback, with_notices

__all__ = ["HostMcp"]


class HostMcp:
    """`host.mcp`: `names()`, `await list_tools(name)`, `await call_tool(name, tool, args)`, and the
    connection's resources, prompts and completions (`list_resources`, `read_resource`, `list_prompts`,
    `get_prompt`, `complete`)."""

    def __init__(
        self, pool: ClientPool, accounts: AccountConnections | None = None, own_grants: PrincipalCalls | None = None
    ) -> None:
        self._pool = pool
        self._accounts = accounts
        self._own_grants = own_grants
        """`grants="per_principal"` connections: listed and called as the acting principal (`_principal_grants.py`)."""

    def names(self) -> list[str]:
        """Every connection's name (host-only connections included), sorted."""
        return sorted([*self._pool.names(), *(self._accounts.names() if self._accounts is not None else [])])

    def _route(self, name: str) -> ClientPool | AccountConnections:
        if self._accounts is not None and self._accounts.serves(name):
            return self._accounts
        if not self._pool.serves(name):
            raise UnknownConnection(name, f"no such connection (defined: {', '.join(self.names()) or 'none'})")
        return self._pool

    def warm_progress(self) -> WarmProgress | None:
        """How far `serve --warm`'s start of every pooled connection has come (None without `--warm`)."""
        return self._pool.warming

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
        route = self._route(name)
        if self._own_grants is not None and self._own_grants.serves(name):
            return await self._own_grants.list_tools(name, use_cache=use_cache)
        return await route.list_tools(name, use_cache=use_cache)

    @overload
    async def call_tool(
        self,
        name: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        task: Literal[False] = False,
        on_progress: ProgressCallback | None = None,
        on_log: LogCallback | None = None,
        log_level: LoggingLevel = "info",
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
    ) -> mt.CallToolResult: ...

    @overload
    async def call_tool(
        self,
        name: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        task: Literal[True],
        ttl_ms: int | None = None,
    ) -> ToolTask | mt.CallToolResult: ...

    async def call_tool(
        self,
        name: str,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        task: bool = False,
        ttl_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
        on_log: LogCallback | None = None,
        log_level: LoggingLevel = "info",
        elicitation: ElicitationHandler | None = None,
        sampling: SamplingHandler | None = None,
    ) -> ToolTask | mt.CallToolResult:
        """Call one tool; an `isError` result is returned as is.

        `on_progress` hears the upstream's progress on this call; `on_log` its log messages at or above
        `log_level` (and the connection's `min_log_level`); both as `mcp.Client` callbacks
        (`host/_host_notices.py`). `elicitation` and `sampling` answer the upstream's requests for input during
        this call (either protocol generation; `connections/host/_host_handlers.py`, docs/clients.md): without one, the
        upstream learns this call cannot answer it. The pool keeps results as JSON; this is where they
        become the SDK's `CallToolResult`.

        With `task=True` the call runs as a task (MCP 2025-11-25 tasks; `ttl_ms` asks the upstream to keep
        it that long): a `ToolTask` handle comes back at once (`await handle.status()`, `.result()`,
        `.cancel()`), or the `CallToolResult` itself from an upstream that ran the call at once. Tasks run
        on pooled connections (stdio, HTTP, SSE), not account connections (`ValueError`).

        Raises `UnknownConnection`, `UnknownTool`, `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`.
        """
        route: ClientPool | AccountConnections | PrincipalCalls = self._route(name)
        if self._own_grants is not None and self._own_grants.serves(name) and not task:
            route = self._own_grants  # the acting principal's own client and grant
        if task:
            if not isinstance(route, ClientPool):
                raise ValueError(f"connection {name!r} is an account connection: tool tasks run on pooled connections")
            created = await route.start_tool_task(name, tool, args, {} if ttl_ms is None else {"ttl": ttl_ms})
            if "task" not in created:
                return as_call_tool_result(created)
            return ToolTask(name, mt.Task.model_validate(created["task"], by_name=False), route)
        if on_progress is None and on_log is None:
            if elicitation is None and sampling is None:
                return as_call_tool_result(await route.call_tool(name, tool, args))
            with with_handlers(elicitation=elicitation, sampling=sampling):
                return as_call_tool_result(await route.call_tool(name, tool, args))
        async with with_notices(on_progress, on_log, log_level):
            with with_handlers(elicitation=elicitation, sampling=sampling):
                return as_call_tool_result(await route.call_tool(name, tool, args))

    async def task_request(self, name: str, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`tasks/get`, `tasks/result`, `tasks/cancel` or `tasks/list` (with the upstream's own task id) on the
        pooled session of `name`, as JSON: what `ToolTask` uses, and what a gateway relaying a peer's task
        requests needs. Raises as `call_tool` does, and `ValueError` for an account connection or another method."""
        route = self._route(name)
        if not isinstance(route, ClientPool):
            raise ValueError(f"connection {name!r} is an account connection: tool tasks run on pooled connections")
        return await route.task_request(name, method, params)

    # -- resources, prompts, completion ------------------------------------------------------------
    # Every one raises `UnknownConnection`, `UpstreamError` (for the upstream's JSON-RPC error, with
    # its `rpc_code`), `UpstreamTimeout`, `ConnectionUnavailable`; `ValueError` for an account
    # connection (not supported there yet).

    async def list_resources(self, name: str) -> list[mt.Resource]:
        """Every resource the connection lists (all pages)."""
        return list(await self._listed(name, "resources/list"))

    async def list_resource_templates(self, name: str) -> list[mt.ResourceTemplate]:
        """Every resource template the connection lists (all pages)."""
        return list(await self._listed(name, "resources/templates/list"))

    async def read_resource(self, name: str, uri: str) -> mt.ReadResourceResult:
        """`resources/read` of `uri`: its text and blob contents."""

        async def run(opened: OpenedClient) -> mt.ReadResourceResult:
            return await read_resource(opened.client, uri)

        return await self._pooled(name).request(name, "resources/read", run)

    async def list_prompts(self, name: str) -> list[mt.Prompt]:
        """Every prompt the connection lists (all pages)."""
        return list(await self._listed(name, "prompts/list"))

    async def get_prompt(
        self, name: str, prompt: str, arguments: Mapping[str, str] | None = None
    ) -> mt.GetPromptResult:
        """`prompts/get` of `prompt` with `arguments`: its messages (text, images, embedded resources)."""

        async def run(opened: OpenedClient) -> mt.GetPromptResult:
            return await get_prompt(opened.client, prompt, arguments)

        return await self._pooled(name).request(name, "prompts/get", run)

    async def complete(
        self,
        name: str,
        ref: mt.PromptReference | mt.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None = None,
    ) -> mt.Completion:
        """`completion/complete`: the values the connection suggests for `argument` (`{"name", "value"}`)
        of a prompt or URI template, given the other arguments in `context`."""

        async def run(opened: OpenedClient) -> mt.CompleteResult:
            return await complete(opened.client, ref, argument, context)

        return (await self._pooled(name).request(name, "completion/complete", run)).completion

    async def _listed(self, name: str, method: ListMethod) -> tuple[Any, ...]:
        async def run(opened: OpenedClient) -> tuple[Any, ...]:
            return (await list_every_page(opened.client, method)).items

        return await self._pooled(name).request(name, method, run)

    def _pooled(self, name: str) -> ClientPool:
        route = self._route(name)
        if not isinstance(route, ClientPool):
            raise ValueError(
                f"connection {name!r} is an account connection: resources, prompts and completion are not "
                "reached through account connections yet; define the connector's url as a connection of its own"
            )
        return route

    async def resource_subscription(self, name: str, uri: str, *, subscribe: bool = True) -> bool:
        """Subscribe (or unsubscribe) the pooled session of `name` to resource `uri`, so the upstream's
        `notifications/resources/updated` for it reach the pool's change watchers (`ListingCache.watch`).
        False when the upstream has no such request (a 2026-07-28 one, or one without `resources.subscribe`).
        Raises as `read_resource` does."""

        async def run(opened: OpenedClient) -> bool:
            return await resource_subscription(opened.client, uri, subscribe=subscribe)

        return await self._pooled(name).request(
            name, "resources/subscribe" if subscribe else "resources/unsubscribe", run
        )

    def __repr__(self) -> str:
        return f"HostMcp(connections={self.names()})"
