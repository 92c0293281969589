"""`translate`: whatever the SDK, httpx2 or the OS raised, as this package's typed errors (`_exceptions.py`).

One mapping for both wires (the fast wire raises httpx2's own exceptions, as HTTPX's
`map_httpcore_exceptions` does) and for pooled and one-off clients. Messages are built here from
codes and classes, never by echoing a request (headers, URLs with queries, environment values),
so no secret reaches a log line or the model.
"""

from __future__ import annotations

import re
from typing import Literal

import anyio
import httpx2
import mcp.types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from oauth import OAuthError

from ._definitions import ConnectionDefinition
from ._exceptions import ConnectionsError, ConnectionUnauthorized, ConnectionUnavailable, UpstreamError, UpstreamTimeout
from ._redact import shown_command, shown_url

__all__ = ["Operation", "answer_lost", "describe", "leaves", "translate"]

Operation = Literal["connect", "list", "call"]
_SSE_LIMIT = re.compile(r"Server-sent event exceeded the (\d+) byte limit")


def describe(operation: Operation, tool: str | None = None) -> str:
    """What was being done, for an error message: `opening the connection`, `tools/list`, `tools/call 'x'`."""
    return {"connect": "opening the connection", "list": "tools/list", "call": f"tools/call {tool!r}"}[operation]


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside `exc` (itself when it is not a group)."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:  # pyright: ignore[reportUnknownVariableType]
            out.extend(leaves(inner))  # pyright: ignore[reportUnknownArgumentType]
        return out
    return [exc]


def _where(defn: ConnectionDefinition) -> str:
    if defn.url is not None:
        return shown_url(defn.url)  # never user info, a query or a secret-looking path segment
    return repr(shown_command(defn.command or ""))


def translate(
    defn: ConnectionDefinition,
    exc: BaseException,
    operation: Operation,
    *,
    http_status: list[int] | None = None,
    tool: str | None = None,
) -> ConnectionsError:
    """The typed error for `exc`, raised while doing `operation` on `defn`; the message names the connection.

    Messages are built here from codes and classes, never by echoing a request (headers, URLs
    with queries, environment values), so no secret reaches a log line or the model.
    """
    found = leaves(exc)
    typed = next((e for e in found if isinstance(e, ConnectionsError)), None)
    if typed is not None:
        return typed
    leaf = next((e for e in found if not isinstance(e, anyio.get_cancelled_exc_class())), found[0])
    name = defn.name
    doing = describe(operation, tool)
    status = f" (HTTP {http_status[-1]})" if http_status else ""
    if isinstance(leaf, OAuthError):
        # The OAuth layer's sentences name the connection's login command and never a token.
        return ConnectionUnauthorized(name, f"{doing} failed: {leaf}")
    if isinstance(leaf, OSError) and defn.kind == "stdio" and operation == "connect":
        reason = leaf.strerror or type(leaf).__name__
        return ConnectionUnavailable(name, f"cannot start {defn.command!r}: {reason}")
    if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
        return UpstreamTimeout(name, f"{doing} timed out")
    if isinstance(leaf, httpx2.ConnectError):
        return ConnectionUnavailable(name, f"cannot connect to {_where(defn)} (connection refused or unreachable)")
    if isinstance(leaf, httpx2.HTTPStatusError):
        code = leaf.response.status_code
        return UpstreamError(name, f"{doing} failed: {_where(defn)} answered HTTP {code}")
    if isinstance(leaf, httpx2.SSEError):
        return UpstreamError(name, f"{doing} failed: {_where(defn)} is not an MCP SSE endpoint ({leaf})"[:400])
    if isinstance(leaf, httpx2.TransportError):
        return ConnectionUnavailable(name, f"{doing} failed: {type(leaf).__name__} talking to {_where(defn)}")
    if isinstance(leaf, MCPError):
        if leaf.code == mt.CONNECTION_CLOSED and (limit := _SSE_LIMIT.search(leaf.message)):
            # The transport stopped reading an oversized event; the session itself is fine.
            return UpstreamError(
                name, f"{doing} failed: the upstream's answer is over the {limit[1]}-byte limit for one SSE event"
            )
        if leaf.code == mt.CONNECTION_CLOSED:
            what = "the server process exited" if defn.kind == "stdio" else "the connection closed"
            return ConnectionUnavailable(name, f"{doing} failed: {what}; it is reopened on the next use")
        if leaf.code == mt.REQUEST_TIMEOUT:
            return UpstreamTimeout(name, f"{doing} timed out")
        if leaf.code == mt.PARSE_ERROR:
            return UpstreamError(name, f"{doing} failed: the upstream's response is not JSON-RPC{status}")
        if leaf.code == mt.INVALID_REQUEST and "content type" in leaf.message.lower():
            return UpstreamError(name, f"{doing} failed: {_where(defn)} is not an MCP endpoint ({leaf.message})")
        if leaf.code == mt.INTERNAL_ERROR and http_status and http_status[-1] >= 400:
            return UpstreamError(name, f"{doing} failed: {_where(defn)} answered HTTP {http_status[-1]}")
        return UpstreamError(name, f"{doing} failed: upstream error {leaf.code}: {leaf.message[:300]}")
    if isinstance(leaf, ValidationError):
        return UpstreamError(name, f"{doing} failed: the upstream's result does not match the MCP schema")
    if isinstance(leaf, anyio.EndOfStream | anyio.ClosedResourceError | anyio.BrokenResourceError):
        return ConnectionUnavailable(name, f"{doing} failed: the connection closed")
    return UpstreamError(name, f"{doing} failed: {type(leaf).__name__}")


def answer_lost(
    defn: ConnectionDefinition, exc: BaseException, operation: Operation, tool: str | None = None
) -> UpstreamError:
    """A call whose answer was cut off or unreadable, on a session that is still fine: that call's own failure."""
    leaf = next((e for e in leaves(exc) if isinstance(e, httpx2.TransportError)), None)
    how = f" ({type(leaf).__name__})" if leaf is not None else ""
    return UpstreamError(
        defn.name,
        f"{describe(operation, tool)} failed: the upstream's answer was cut off or unreadable{how}; "
        "the tool may have run; the connection stays open",
    )
