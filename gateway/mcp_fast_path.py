"""The hot request on `/v1/mcp/tools` — one handshake-era `tools/call` — answered without the SDK's
per-request transport.

The SDK's stateless handshake-era path (`StreamableHTTPSessionManager._handle_stateless_request`)
builds, for every POST, a `StreamableHTTPServerTransport`, its memory streams and message
router, a `JSONRPCDispatcher` and a task in the manager's task group, and tears them all down
again; that plumbing cost more than the gateway's own work. This module serves the one request
that dominates the traffic — a single JSON-RPC `tools/call` request — through the same kernel
the SDK runs behind that plumbing (`mcp.server.runner.serve_one`: the same spec-method params
validation, handler, result serialisation and exception mapping), and writes the answer the
transport would have written.

It takes a request only when every check the SDK's transport makes would pass (the manager's
era routing, `TransportSecurityMiddleware`'s Content-Type check, the JSON-mode Accept check,
the transport's Content-Type check, the JSON-RPC message union); anything else — another
method, a notification, a malformed envelope, a 2026-07-28 request (the SDK already serves
those in a single exchange, with `Mcp-Param-*` checks this module does not repeat) — returns
`False` and goes to the SDK unchanged. `tests/gateway/test_mcp_fast_path.py` pins the answers
equal to the SDK's for successes, error results, unknown tools, invalid params and fail-closed
listings.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.runner import serve_one
from mcp.server.streamable_http import CONTENT_TYPE_JSON
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    ErrorData,
    JSONRPCRequest,
    ProgressToken,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from connections import tracing_enabled

from .json_pieces import answer_pieces

__all__ = ["serve_tools_call"]

logger = logging.getLogger("agent_sdk.mcp")

ToolsCallHandler = Callable[[Scope, str, Mapping[str, Any] | None, str], Awaitable[dict[str, Any]]]
"""The server's `tools/call` handler body: the ASGI scope (for the runtime), the tool name, its
arguments and the negotiated version; returns the result as the server sends it at that version."""

_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)
_PROTOCOL_VERSION = b"mcp-protocol-version"


@dataclass
class _JsonDispatchContext:
    """What the SDK's dispatcher hands a handshake-era stateless JSON-mode request, minus the pipes.

    In JSON-response mode the transport drops every message related to the request except its
    response, so `notify` and `progress` have no wire; stateless, a server-to-client request
    has nowhere to be answered (`NoBackChannelError`), as in the SDK.
    """

    request_id: RequestId
    message_metadata: ServerMessageMetadata
    progress_token: ProgressToken | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    transport: TransportContext = _TRANSPORT

    @property
    def can_send_request(self) -> bool:
        return False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: object = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: object = None) -> None:
        logger.debug("dropped %s: a JSON response carries only the result", method)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


@functools.lru_cache(maxsize=64)  # a client sends the same Accept on every request
def _accepts_json(accept: str) -> bool:
    """`check_accept_headers`'s JSON half (RFC 7231 wildcards included)."""
    types = [media.strip().split(";")[0].strip().lower() for media in accept.split(",")]
    return any(t in (CONTENT_TYPE_JSON, "application/*", "*/*") for t in types)


@functools.lru_cache(maxsize=64)
def _content_type_ok(content_type: str | None) -> bool:
    """Both Content-Type checks of the SDK's handshake-era POST path pass."""
    if content_type is None or not content_type.lower().startswith(CONTENT_TYPE_JSON):
        return False  # TransportSecurityMiddleware: 400
    parts = [part.strip() for part in content_type.split(";")[0].split(",")]
    return CONTENT_TYPE_JSON in parts  # the transport's own check: 415


def _request(body: object) -> JSONRPCRequest | None:
    """The `tools/call` request in `body` (the parsed POST) exactly as the transport would validate it, else None."""
    if not isinstance(body, dict) or body.get("method") != "tools/call":  # pyright: ignore[reportUnknownMemberType]
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(body, by_name=False)
    except (ValueError, ValidationError):
        return None
    if not isinstance(message, JSONRPCRequest) or message.method != "tools/call":
        return None
    return message


_PLAIN_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
_PLAIN_PARAMS = frozenset({"name", "arguments"})


def _plain_call(body: Mapping[str, Any]) -> tuple[RequestId, str, dict[str, Any] | None] | None:
    """`(id, name, arguments)` when `body` is a plain `tools/call` that every validation would pass.

    Plain: exactly the four envelope keys, `jsonrpc` "2.0", a string or (non-bool) integer id, and
    params holding a string `name` and, optionally, an object `arguments`, nothing else. Such a
    request satisfies the JSON-RPC message union, the spec's params schema of every handshake-era
    version and `CallToolRequestParams`, so checking it by hand gives the same verdict at a fraction
    of the cost. Anything else returns None and takes the full validation.
    """
    if (
        len(body) != len(_PLAIN_ENVELOPE)
        or not _PLAIN_ENVELOPE.issuperset(body)
        or body["jsonrpc"] != "2.0"
        or body["method"] != "tools/call"
    ):
        return None
    ident, params = body["id"], body["params"]
    if type(ident) not in (str, int) or type(params) is not dict:
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not _PLAIN_PARAMS.issuperset(params) or type(name) is not str:
        return None
    if arguments is not None and type(arguments) is not dict:
        return None
    return ident, name, arguments


async def serve_tools_call(
    manager: StreamableHTTPSessionManager,
    scope: Scope,
    receive: Receive,
    send: Send,
    raw: bytes,
    body: object,
    *,
    handler: ToolsCallHandler | None = None,
) -> bool:
    """Answer `raw` if it is a handshake-era `tools/call` the SDK would dispatch; False otherwise.

    `raw` is the whole (already capped) body and `body` its parsed JSON object; `receive` replays
    `raw` for handlers that read the request. `handler` is the server's own `tools/call` handler
    body, called directly (`_kernel_free`) when the SDK kernel around it would add nothing.
    """
    version = _header(scope, _PROTOCOL_VERSION)
    if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return False  # the 2026-07-28 single-exchange entry
    if not _content_type_ok(_header(scope, b"content-type")) or not _accepts_json(_header(scope, b"accept") or ""):
        return False
    if manager.max_request_body_size < len(raw):
        return False
    negotiated = version or DEFAULT_NEGOTIATED_VERSION
    free = handler is not None and _kernel_adds_nothing(manager.app)
    plain = _plain_call(body) if free and isinstance(body, dict) else None  # pyright: ignore[reportUnknownArgumentType]
    message: JSONRPCRequest | None = None
    if plain is not None:
        ident, name, arguments = plain
        params: Mapping[str, Any] | None = None
    else:
        message = _request(body)
        if message is None:
            return False
        ident, name, arguments, params = message.id, None, None, message.params
    answer: dict[str, Any]
    try:
        if handler is not None and free:
            result = await _kernel_free(handler, scope, negotiated, name, arguments, params)
        else:
            assert message is not None  # a `_plain_call` is taken only on the kernel-free path
            result = await _kernel(manager, scope, receive, negotiated, message)
    except Exception as exc:
        error = _error_data(exc).model_dump(by_alias=True, exclude_unset=True)
        answer = {"jsonrpc": "2.0", "id": ident, "error": error}
    else:
        answer = {"jsonrpc": "2.0", "id": ident, "result": result}
        del result  # the answer owns it now: `_send_json` releases it as it is serialized
    await _send_json(send, answer)
    return True


async def _kernel(
    manager: StreamableHTTPSessionManager, scope: Scope, receive: Receive, version: str, message: JSONRPCRequest
) -> dict[str, Any]:
    """The request through the SDK's `serve_one`, with the dispatch context the stateless transport gives it."""
    request = Request(scope, receive)
    dctx = _JsonDispatchContext(
        request_id=message.id,
        message_metadata=ServerMessageMetadata(request_context=request, can_send_request=False),
        progress_token=progress_token_from_params(message.params),
    )
    return await serve_one(
        manager.app,
        dctx,
        message.method,
        message.params,
        connection=Connection.from_envelope(version, None, None),
        lifespan_state=getattr(manager, "_lifespan_state", None),
    )


def _error_data(exc: Exception) -> ErrorData:
    """The dispatcher's exception-to-wire boundary, rung for rung."""
    error = handler_exception_to_error_data(exc)
    if error is None:
        logger.exception("handler for 'tools/call' raised")
        error = ErrorData(code=0, message=str(exc))
    return error


async def _send_json(send: Send, answer: dict[str, Any]) -> None:
    """What the SDK transport writes for a JSON-mode answer: 200, `application/json`, the message
    (a large result in pieces, each written under the server's flow control: `json_pieces.py`)."""
    pieces = answer_pieces(answer)
    length = sum(len(piece) for piece in pieces)
    headers = [(b"content-type", CONTENT_TYPE_JSON.encode()), (b"content-length", str(length).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    last = len(pieces) - 1
    for i in range(len(pieces)):
        piece, pieces[i] = pieces[i], b""  # written pieces are not held until the last one is
        await send({"type": "http.response.body", "body": piece, "more_body": i < last})
        del piece


def _kernel_adds_nothing(server: Server[Any]) -> bool:
    """Whether `serve_one` around the handler would do only what `_kernel_free` does.

    True when the server's only middleware is the SDK's OpenTelemetry one and no tracer provider
    is installed (its span would record nothing), and `tools/call` has no cache hint.
    """
    middleware = server.middleware
    return (
        len(middleware) == 1
        and isinstance(middleware[0], OpenTelemetryMiddleware)
        and "tools/call" not in server.cache_hints
        and not tracing_enabled()
    )


async def _kernel_free(
    handler: ToolsCallHandler,
    scope: Scope,
    version: str,
    name: str | None,
    arguments: Mapping[str, Any] | None,
    params: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """`ServerRunner._on_request` for a handshake-era `tools/call`, without the runner around it.

    The same steps in the same order: the spec's params validation for `version` and the handler's
    params model (both skipped for a `_plain_call`, which passes them; its `name` and `arguments`
    come given), the handler, the per-version result sieve (a result it rejects is the server's bug:
    INTERNAL_ERROR, the detail only in the log). Raises what the kernel raises.
    """
    if name is None:
        try:
            _methods.validate_client_request("tools/call", version, params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tools/call") from None
        typed = CallToolRequestParams.model_validate({} if params is None else params, by_name=False)
        name, arguments = typed.name, typed.arguments
    try:
        return await handler(scope, name, arguments, version)
    except ValidationError:
        logger.exception("handler for 'tools/call' returned an invalid result")
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
