"""`translate`: whatever the SDK, httpx2 or the OS raised, as this package's typed errors (`_exceptions.py`).

One mapping for both wires (the fast wire raises httpx2's own exceptions, as HTTPX's
`map_httpcore_exceptions` does) and for every pool (identity clients' too). Messages are built here from
codes and classes, never by echoing a request (headers, URLs with queries, environment values),
so no secret reaches a log line or the model.
"""

from __future__ import annotations

import re
from typing import Literal

import anyio
import httpx2
import mcp_types as mt
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from oauth import AuthorizationServerUnreachable, InsufficientScope, LoginRequired, OAuthError

from .._exceptions import (
    AuthorizationUnavailable,
    ConnectionsError,
    ConnectionUnauthorized,
    ConnectionUnavailable,
    ResultTooLarge,
    SignInRequired,
    UpstreamError,
    UpstreamTimeout,
)
from .._redact import shown_command, shown_url
from ..project._definitions import ConnectionDefinition
from ._transports._stdio import StdioChild

__all__ = [
    "REOPEN_NOTE",
    "Operation",
    "answer_lost",
    "describe",
    "leaves",
    "made_here",
    "translate",
    "transport_failure",
]

Operation = Literal[
    "connect",
    "list",
    "call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
    "tasks/list",
    "resources/subscribe",
    "resources/unsubscribe",
]
_SSE_LIMIT = re.compile(r"Server-sent event exceeded the (\d+) byte limit")
_RESULT_LIMIT = re.compile(r"answer over the (\d+)-byte limit \(max_result_bytes\)")  # ResultTooLarge.transport_note


def describe(operation: Operation, tool: str | None = None) -> str:
    """What was being done, for an error message: `opening the connection`, `tools/list`, `tools/call 'x'`."""
    if operation == "connect":
        return "opening the connection"
    if operation == "list":
        return "tools/list"
    return f"tools/call {tool!r}" if operation == "call" else operation


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions inside `exc` (itself when it is not a group)."""
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(leaves(inner))
        return out
    return [exc]


def _where(defn: ConnectionDefinition) -> str:
    if defn.url is not None:
        return shown_url(defn.url)  # never user info, a query or a secret-looking path segment
    return repr(shown_command(defn.command or ""))


REOPEN_NOTE = "; it is reopened on the next use"
"""Ends the message of a session that ended under a call; a one-shot command drops it (there is no next use)."""


def _no_endpoint(defn: ConnectionDefinition) -> str:
    """What a 404/405 on a Streamable HTTP URL usually means, and the fix."""
    path = (defn.url or "").split("?", 1)[0].rstrip("/")
    if path.endswith("/sse"):
        return (
            'this looks like a legacy HTTP+SSE endpoint: add transport="sse" to the connection (in mcp.json: '
            '"type": "sse")'
        )
    return (
        "there is no Streamable HTTP MCP endpoint at this URL: check the path (servers often use /mcp), or, for a "
        'legacy HTTP+SSE server (its URL often ends in /sse), add transport="sse"'
    )


def _endpoint_missing(defn: ConnectionDefinition, operation: Operation, status: int) -> bool:
    """A 404/405 to the opening request of a Streamable HTTP connection: no MCP endpoint at that URL.

    On an open session a 404 is the SDK transport's "no such method" (or a forgotten session): not this."""
    return status in (404, 405) and defn.kind == "http" and operation == "connect"


def transport_failure(exc: BaseException) -> str:
    """An HTTP transport failure in words rather than a class name ("connection refused or unreachable")."""
    words = {
        "ConnectError": "connection refused or unreachable",
        "ConnectTimeout": "timed out connecting",
        "ReadTimeout": "timed out waiting for the answer",
        "WriteTimeout": "timed out sending the request",
        "PoolTimeout": "timed out waiting for a free connection",
        "ReadError": "reading the answer failed",
        "WriteError": "sending the request failed",
        "RemoteProtocolError": "the server broke the HTTP protocol",
        "ProxyError": "the proxy refused",
        "UnsupportedProtocol": "the URL's scheme is not http or https",
    }
    return words.get(type(exc).__name__, "a transport error")


_STREAM_LOST = re.compile(
    r"SSE stream (?:failed: .*|ended without a response|ended and reconnection attempts were exhausted)", re.DOTALL
)
"""What the SDK's Streamable HTTP transport (and the fast wire, which mirrors it) makes up for an answer
stream lost under one call: it writes these into the session's read stream beside the upstream's real
answers, so the text is the only mark they carry."""


def made_here(leaf: MCPError, operation: Operation, *, alive: bool) -> bool:
    """Whether a -32000 ("connection closed") or -32001 ("request timeout") was made by this side (the SDK's
    dispatcher or transport, the fast wire) rather than sent by the upstream, which may answer with any code.

    -32000 is ours when the transport really ended (`alive` False: the read stream closed or the stdio
    child exited) or when it is an HTTP answer stream the transport gave up on (`_STREAM_LOST`). -32001
    is ours only while opening: the 2026-07-28 probe is the one request sent with an SDK timeout (every
    operation on an open session is bounded by the pool, which raises `TimeoutError` instead).
    """
    if leaf.code == mt.CONNECTION_CLOSED:
        return not alive or _STREAM_LOST.fullmatch(leaf.message) is not None
    return leaf.code == mt.REQUEST_TIMEOUT and operation == "connect"


def translate(
    defn: ConnectionDefinition,
    exc: BaseException,
    operation: Operation,
    *,
    http_status: list[int] | None = None,
    tool: str | None = None,
    child: StdioChild | None = None,
    alive: bool = False,
) -> ConnectionsError:
    """The typed error for `exc`, raised while doing `operation` on `defn`; the message names the connection.

    `alive`: the session's transport (and stdio child) was still up after `exc`, so a -32000 or -32001
    that the SDK did not make is the upstream's own error answer (`made_here`).

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
    if isinstance(leaf, MCPError | httpx2.StreamError | httpx2.SSEError) and (limit := _RESULT_LIMIT.search(str(leaf))):
        return ResultTooLarge(
            name,
            f"{doing} refused: the upstream's answer is over this connection's max_result_bytes ({limit[1]} bytes); "
            "ask the tool for less, or raise max_result_bytes in the connection's definition",
        )
    if isinstance(leaf, AuthorizationServerUnreachable):
        return AuthorizationUnavailable(name, f"{doing} failed: its OAuth authorization server is unreachable: {leaf}")
    if isinstance(leaf, LoginRequired | InsufficientScope) and leaf.principal:  # a sign-in link (the step-up's scopes)
        said = str(leaf).removeprefix(f"connection {name!r} ")
        return SignInRequired(name, leaf.principal, f"{doing} failed: this connection {said}")
    if isinstance(leaf, OAuthError):
        # The OAuth layer's sentences name the connection's login command and never a token. They
        # start with "connection 'x' ...", which the error's own prefix already says.
        said, own = str(leaf), f"connection {name!r} "
        said = f"this connection {said.removeprefix(own)}" if said.startswith(own) else said
        return ConnectionUnauthorized(name, f"{doing} failed: {said}")
    if isinstance(leaf, OSError) and defn.kind == "stdio" and operation == "connect":
        reason = leaf.strerror or type(leaf).__name__
        return ConnectionUnavailable(name, f"cannot start {defn.command!r}: {reason}")
    if isinstance(leaf, httpx2.TimeoutException | TimeoutError):
        return UpstreamTimeout(name, f"{doing} timed out")
    if isinstance(leaf, httpx2.ConnectError):
        return ConnectionUnavailable(name, f"cannot connect to {_where(defn)} (connection refused or unreachable)")
    if isinstance(leaf, httpx2.HTTPStatusError):
        code = leaf.response.status_code
        hint = f"; {_no_endpoint(defn)}" if _endpoint_missing(defn, operation, code) else ""
        return UpstreamError(name, f"{doing} failed: {_where(defn)} answered HTTP {code}{hint}")
    if isinstance(leaf, httpx2.SSEError):
        return UpstreamError(name, f"{doing} failed: {_where(defn)} is not an MCP SSE endpoint ({leaf})"[:400])
    if isinstance(leaf, httpx2.TransportError):
        return ConnectionUnavailable(
            name, f"{doing} failed: the connection to {_where(defn)} broke ({transport_failure(leaf)})"
        )
    if isinstance(leaf, MCPError) and made_here(leaf, operation, alive=alive):
        if leaf.code == mt.CONNECTION_CLOSED and (limit := _SSE_LIMIT.search(leaf.message)):
            # The transport stopped reading an oversized event; the session itself is fine.
            return ResultTooLarge(
                name, f"{doing} refused: the upstream's answer is over the {limit[1]}-byte limit for one SSE event"
            )
        if leaf.code == mt.CONNECTION_CLOSED:
            exited = f"the server process exited{child.exit_text() if child is not None else ''}"
            what = exited if defn.kind == "stdio" else "the connection closed"
            return ConnectionUnavailable(name, f"{doing} failed: {what}{REOPEN_NOTE}")
        return UpstreamTimeout(name, f"{doing} timed out")
    if isinstance(leaf, MCPError):
        if leaf.code == mt.PARSE_ERROR:
            return UpstreamError(name, f"{doing} failed: the upstream's response is not JSON-RPC{status}")
        if leaf.code == mt.INVALID_REQUEST and "content type" in leaf.message.lower():
            return UpstreamError(name, f"{doing} failed: {_where(defn)} is not an MCP endpoint ({leaf.message})")
        if http_status and _endpoint_missing(defn, operation, http_status[-1]):
            return UpstreamError(
                name, f"{doing} failed: {_where(defn)} answered HTTP {http_status[-1]}; {_no_endpoint(defn)}"
            )
        if leaf.code == mt.INTERNAL_ERROR and http_status and http_status[-1] >= 400:
            return UpstreamError(name, f"{doing} failed: {_where(defn)} answered HTTP {http_status[-1]}")
        return UpstreamError.refused(
            name,
            f"{doing} failed: upstream error {leaf.code}: {leaf.message[:300]}",
            rpc_code=leaf.code,
            rpc_message=leaf.message,
            rpc_data=leaf.data,
        )
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
    how = f" ({transport_failure(leaf)})" if leaf is not None else ""
    return UpstreamError(
        defn.name,
        f"{describe(operation, tool)} failed: the upstream's answer was cut off or unreadable{how}; "
        "the tool may have run; the connection stays open",
    )
