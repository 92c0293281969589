"""One-off clients: open, do one operation, close. They carry a session's own headers (per-session `auth`).

Never pooled, so one tenant's credentials can never serve another (docs/clients.md). The open is
bounded by `timeouts.connect`, the operation by `timeouts.list` or `timeouts.call`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import httpx2
import mcp.types as mt
from mcp import Client

from ._clients import list_all_tools, open_client
from ._definitions import ConnectionDefinition
from ._exceptions import ClientError, UnknownTool, UpstreamTimeout
from ._tool_results import call_tool_json
from ._translate import Operation, describe, translate

__all__ = ["call_tool_once", "list_tools_once"]


async def _one_off(
    defn: ConnectionDefinition,
    operation: Operation,
    run: Callable[[Client], Any],
    *,
    headers: Mapping[str, str],
    environ: Mapping[str, str] | None,
    auth: httpx2.Auth | None,
    tool: str | None = None,
) -> Any:
    phase: Operation = "connect"
    status: list[int] = []
    # One scope for the whole life of the client: its deadline moves from the connect budget to
    # the operation's, so no cancel scope is exited out of order around the client's task groups.
    with anyio.CancelScope(deadline=anyio.current_time() + defn.timeouts.connect) as scope:
        try:
            async with open_client(defn, headers=headers, environ=environ, auth=auth, http_status=status) as opened:
                phase = operation
                budget = defn.timeouts.list if operation == "list" else defn.timeouts.call
                scope.deadline = anyio.current_time() + budget
                return await run(opened.client)
        except ClientError:
            raise
        except Exception as exc:
            if scope.cancel_called:
                raise UpstreamTimeout(defn.name, f"{describe(phase, tool)} timed out") from None
            raise translate(defn, exc, phase, http_status=status, tool=tool) from None
    raise UpstreamTimeout(defn.name, f"{describe(phase, tool)} timed out")


async def list_tools_once(
    defn: ConnectionDefinition,
    *,
    headers: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    auth: httpx2.Auth | None = None,
) -> list[mt.Tool]:
    """List `defn`'s tools through a one-off client carrying `headers` over the static ones; never pooled.

    Raises `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`, `EnvironmentVariableMissing`.
    """

    async def run(client: Client) -> list[mt.Tool]:
        return await list_all_tools(defn, client)

    result: list[mt.Tool] = await _one_off(defn, "list", run, headers=headers, environ=environ, auth=auth)
    return result


async def call_tool_once(
    defn: ConnectionDefinition,
    tool: str,
    arguments: Mapping[str, Any] | None,
    *,
    headers: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    auth: httpx2.Auth | None = None,
) -> dict[str, Any]:
    """Call `tool` through a one-off client carrying `headers` over the static ones; never pooled.
    The result as JSON (`call_tool_json`).

    Raises `UnknownTool` (allow/deny lists), `UpstreamError`, `UpstreamTimeout`,
    `ConnectionUnavailable`, `EnvironmentVariableMissing`.
    """
    if not defn.allows_tool(tool):
        raise UnknownTool(defn.name, tool, f"tool {tool!r} is not allowed by the connection's allow/deny lists")

    async def run(client: Client) -> dict[str, Any]:
        return await call_tool_json(client, tool, dict(arguments or {}), defn.min_log_level)

    result: dict[str, Any] = await _one_off(defn, "call", run, headers=headers, environ=environ, auth=auth, tool=tool)
    return result
