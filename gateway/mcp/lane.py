"""The one lane for `tools/call` and `tools/list` on `/v1/mcp/tools`, for both protocol generations.

Through the SDK, every POST pays for plumbing around the handler: at the handshake versions a
`StreamableHTTPServerTransport` with its memory streams, a `JSONRPCDispatcher` and a task in the
manager's task group; at 2026-07-28 a `tools/list` of the whole catalog on every call that has
arguments (to check `Mcp-Param-*` headers), a dispatch context, a connection and a runner. This
lane answers the two requests that make the traffic with the same checks, in the same order, and
the same bodies (a `tools/call` becomes a `CallPlan` run by the one executor, `gateway/mcp/pipeline.py`;
`tools/list` is `tools.tools_list_result`), writing what the SDK writes:

1. the transport's checks: `Content-Type` and `Accept` (else the SDK answers 400/406/415);
2. at 2026-07-28 (the `MCP-Protocol-Version` header names no handshake version), the inbound
   ladder, with the SDK's own functions: a routing header sent twice, the `_meta` envelope,
   `MCP-Protocol-Version` / `Mcp-Method` / `Mcp-Name` against the body (-32020 HEADER_MISMATCH),
   the protocol version served (-32022), each with the spec's HTTP status;
3. the spec's params schema for the version (INVALID_PARAMS);
4. at 2026-07-28, the `Mcp-Param-*` headers of a tool whose input schema marks parameters
   `x-mcp-header`, against the catalog's cached schema, not a fresh listing (-32020);
5. the tool resolved once (an unknown one is INVALID_PARAMS), the plan run by the executor, then
   the result validated and shaped for the peer's version (a 2026-07-28 result gets `resultType`
   and this server's `serverInfo` stamp).

With OpenTelemetry tracing on the lane still answers: `tools/list` in its server span, `tools/call` in
the executor's (`gateway/telemetry/spans.py`), so turning tracing on changes nothing a peer gets. Anything else (another
method, a notification, an envelope with extra members, an id that is neither a string nor an
integer, a server with a middleware of its own on these methods) returns False and goes to the
SDK's manager, unchanged, whose `tools/call` handler runs the same executor.
`tests/gateway/mcp/test_mcp_lane.py` requires every answer equal to the SDK's.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.lowlevel import Server
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import CONTENT_TYPE_JSON
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    SERVER_INFO_META_KEY,
    ErrorData,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Receive, Scope, Send

from connections import TurnTool
from connections.serving import PLAIN, tracing_enabled

from ..auth.chain import Principal
from ..http.json_pieces import answer_pieces
from ..policy import caller_of
from ..runtime import Runtime
from ..telemetry.spans import ServerSpans, inbound_of_scope, server_span
from .call_stream import (
    JsonAnswer,
    SseAnswer,
    call_request,
    peer_cancelled,
    peer_of,
    send_accepted,
    stream_answer,
    until_gone,
)
from .curated import CuratedView
from .discovery import META_NAMES, unwrapped
from .lane_checks import ladder_rejection, param_rejection, rejected, valid_request
from .peers.calls import Peer
from .pipeline import CallPlan, lookup, target_of, view_target
from .tools import tools_list_result

__all__ = ["serve_lane"]

logger = logging.getLogger("agent_sdk.mcp")

_METHODS = frozenset({"tools/call", "tools/list"})
_ENVELOPE = frozenset({"jsonrpc", "id", "method", "params"})
_PROTOCOL_VERSION = b"mcp-protocol-version"
_COMPLETE = "complete"


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
    """Both Content-Type checks of the SDK's POST path pass (`TransportSecurityMiddleware`: 400; the transport: 415)."""
    if content_type is None or not content_type.lower().startswith(CONTENT_TYPE_JSON):
        return False
    parts = [part.strip() for part in content_type.split(";")[0].split(",")]
    return CONTENT_TYPE_JSON in parts


def _sdk_adds_nothing(server: Server[Any]) -> bool:
    """Whether the SDK's kernel around the handlers would do only what the lane does: no middleware acts
    on these methods but a tracing one (`ServerSpans`, or the SDK's own: the lane opens the same span
    itself when tracing is on, `gateway/telemetry/spans.py`), and neither method has a cache hint."""
    # A middleware that names the only methods it acts on (`only_methods`, e.g. gateway/mcp/instructions.py's)
    # observes none of the lane's.
    middleware = [m for m in server.middleware if _METHODS.intersection(getattr(m, "only_methods", _METHODS))]
    return all(isinstance(m, OpenTelemetryMiddleware | ServerSpans) for m in middleware) and not _METHODS.intersection(
        server.cache_hints
    )


async def serve_lane(
    manager: StreamableHTTPSessionManager,
    runtime: Runtime,
    scope: Scope,
    receive: Receive,
    send: Send,
    size: int,
    body: dict[str, Any],
    view: CuratedView | None = None,
) -> bool:
    """Answer `body` (the parsed POST of `size` bytes) if it is a `tools/call` or `tools/list` request
    the lane takes (module docstring); False, with nothing sent, otherwise. A peer's
    `notifications/cancelled` cancels its call here, then goes on to the SDK (which answers 202). With
    `view`, the endpoint is that curated server's (`gateway/mcp/curated.py`): its listing, its names."""
    if type(body) is not dict:
        return False
    method = body.get("method")
    ident: str | int = body.get("id")  # pyright: ignore[reportAssignmentType]  # checked just below
    if method == "notifications/cancelled":
        peer_cancelled(runtime.peers, peer_of(scope), body.get("params"))
        return False
    if method not in _METHODS or type(ident) not in (str, int) or not _ENVELOPE.issuperset(body):
        return False
    server = manager.app
    if size > manager.max_request_body_size or not _sdk_adds_nothing(server):
        return False
    if not _content_type_ok(_header(scope, b"content-type")) or not _accepts_json(_header(scope, b"accept") or ""):
        return False
    requested = _header(scope, _PROTOCOL_VERSION)
    modern = requested is not None and requested not in HANDSHAKE_PROTOCOL_VERSIONS
    params: dict[str, Any] | None = body.get("params")
    if method == "tools/call":  # discovery's `call_tool` is the named tool's own (discovery.py)
        params = unwrapped(runtime.discovery if view is None else view.discovery, params)
    headers: list[tuple[str, str]] = []
    found: tuple[Any, ...] | None = None  # the catalog's answer for the tool, looked up once
    try:
        if modern:
            headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
            rejection = ladder_rejection(body, headers)
            if rejection is not None:
                await _send_jsonrpc(send, ident, error=rejected(rejection), modern=True)
                return True
            version: str = requested  # pyright: ignore[reportAssignmentType]  # the ladder matched it to the body
            if method == "tools/call":  # before the params schema, as in the SDK's entry
                found = await _lookup(runtime, params, caller_of(scope), view)
                # `Mcp-Param-*` follow the schema of the tool the request names: `call_tool`'s marks none, so a
                # call through it is not held to the real tool's (docs/discovery.md); the gateway mirrors them upstream.
                sent = params is body.get("params")
                rejection = param_rejection(scope, params, headers, found) if sent else None
                if rejection is not None:
                    await _send_jsonrpc(send, ident, error=rejected(rejection), modern=True)
                    return True
        else:
            version = requested or DEFAULT_NEGOTIATED_VERSION
        valid_request(method, version, params)
        if method == "tools/call":
            assert params is not None  # the schema requires them
            who = peer_of(scope, modern=modern)  # the principal, and a handshake peer's session (mcp/peers/sessions.py)
            # An unknown tool is refused before the answer can turn into a stream (at 2026-07-28 its
            # error has an HTTP status of its own, which a stream's 200 could not carry).
            caller = caller_of(scope)
            if view is None:
                target, arguments = await target_of(runtime, params["name"], caller, found), params.get("arguments")
            else:
                target, arguments = await view_target(
                    runtime, view, params["name"], caller, params.get("arguments"), found
                )
            plan = _plan(runtime, who, caller, ident, target, params, version, modern=modern)
            if view is not None:
                plan = replace(plan, arguments=arguments, view=view, served_as=params["name"])
            if tracing_enabled():  # where it came from, for its server span (gateway/telemetry/spans.py)
                plan = replace(plan, inbound=inbound_of_scope(scope, who[1], who[0]))
            if plan.answer == "sse":
                channel = SseAnswer(runtime.asks, who[0])
                run_call = functools.partial(_answer, server, runtime, plan, channel)
                await stream_answer(send, receive, runtime.peers, who, ident, channel, run_call)
                return True
            plain = JsonAnswer()
            call = runtime.executor.execute(plan, plain)
            done = await until_gone(receive, runtime.peers, who, ident, call, plain)
            if done is None:
                await send_accepted(send)  # the peer cancelled it: no JSON-RPC answer follows
                return True
            result, done = done, None  # one reference: the answer written in pieces releases the result
            spliced = plain.spliced(result, ident, version, _stamp(server))
            if spliced is not None:  # nothing to change: the upstream's bytes with the peer's id (module docstring)
                del result
                await _write(send, 200, [spliced])
                return True
        else:
            result = await _listed(runtime, version, ident, scope, params, view, modern=modern)
        wire = _shaped(server, method, version, result, modern=modern)
    except Exception as exc:
        await _send_jsonrpc(send, ident, error=_error_data(exc, modern=modern), modern=modern)
    else:
        del result  # the answer owns the result now: written in pieces, it is released as its bytes appear
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "result": wire}
        del wire
        await _write(send, 200, _serialized(answer, modern=modern))
    return True


async def _lookup(runtime: Runtime, params: Any, caller: Principal, view: CuratedView | None) -> tuple[Any, ...] | None:
    """The catalog's answer for the tool a `tools/call` names, as `caller` may see it (None when the name
    is not a string: the params schema rejects it). Through `view`, the real tool its name stands for."""
    name = params.get("name") if isinstance(params, Mapping) else None
    if not isinstance(name, str):
        return None
    if view is not None:
        if view.discovery is not None and name in META_NAMES:  # the view's own (`view_target`)
            return None
        return await lookup(runtime, view.real_name(name), caller, view.name)
    if runtime.discovery is not None and name in META_NAMES:  # the view's own (`target_of`): no catalog tool
        return None
    return await lookup(runtime, name, caller)


def _plan(
    runtime: Runtime,
    who: Peer,
    caller: Principal,
    ident: str | int,
    target: TurnTool,
    params: dict[str, Any],
    version: str,
    *,
    modern: bool,
) -> CallPlan:
    """The call's plan: what it asks for besides the result, and whether its answer streams (a progress
    token, a log level, or a handshake peer whose sealed session declares `elicitation` / `sampling`)."""
    principal, session = who
    request = call_request(runtime.peers, who, params, modern=modern)
    streams = request is not PLAIN
    if not modern and session is not None:
        declared = runtime.request_states.open_session(session, principal)
        if declared:
            request, streams = replace(request, capabilities=declared), True
    return CallPlan(
        request_id=ident,
        target=target,
        arguments=params.get("arguments"),
        params=params,
        principal=principal,
        caller=caller,
        version=version,
        modern=modern,
        request=request,
        answer="sse" if streams else "json",
    )


async def _listed(
    runtime: Runtime,
    version: str,
    ident: object,
    scope: Scope,
    params: Mapping[str, Any] | None,
    view: CuratedView | None,
    *,
    modern: bool,
) -> dict[str, Any]:
    """`tools/list` as the caller may see it, in its server span when tracing is on."""
    caller = caller_of(scope)
    if not tracing_enabled():
        return await tools_list_result(runtime, caller, view)
    principal, session = peer_of(scope, modern=modern)
    meta = params.get("_meta") if params else None
    with server_span("tools/list", None, version, ident, meta, inbound_of_scope(scope, session, principal)) as done:
        result = await tools_list_result(runtime, caller, view)
        done(result)
        return result


def _shaped(server: Server[Any], method: str, version: str, result: dict[str, Any], *, modern: bool) -> dict[str, Any]:
    """`ServerRunner._serialize` for these two methods: validated and sieved for `version`; a 2026-07-28
    result carries `resultType` and this server's `serverInfo` stamp. Raises `MCPError` (INTERNAL_ERROR)
    for a result the version's schema rejects (the server's bug: the detail goes to the log only)."""
    try:
        wire = _methods.serialize_server_result(method, version, result)
    except ValidationError:
        logger.exception("handler for %r returned an invalid result", method)
        raise MCPError(code=INTERNAL_ERROR, message="Handler returned an invalid result") from None
    if modern and version in MODERN_PROTOCOL_VERSIONS:
        if wire.get("resultType") is None:
            wire["resultType"] = _COMPLETE
        meta = wire.get("_meta")
        if meta is None:
            wire["_meta"] = {SERVER_INFO_META_KEY: _stamp(server)}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            wire["_meta"] = {**meta, SERVER_INFO_META_KEY: _stamp(server)}
    return wire


@functools.lru_cache(maxsize=8)
def _stamp(server: Server[Any]) -> dict[str, Any]:
    """`server.server_info_stamp`, once: the SDK deep-copies it per access so a caller may mutate it;
    the lane only serialises it."""
    return server.server_info_stamp


def _error_data(exc: Exception, *, modern: bool) -> ErrorData:
    """The SDK's exception-to-wire boundary: `modern_error_data` at 2026-07-28, the dispatcher's ladder
    (code 0 for anything unmapped) at the handshake versions."""
    if modern:
        return modern_error_data(exc)
    error = handler_exception_to_error_data(exc)
    if error is None:
        logger.exception("handler for a tools request raised")
        error = ErrorData(code=0, message=str(exc))
    return error


async def _send_jsonrpc(
    send: Send, ident: Any, *, result: dict[str, Any] | None = None, error: ErrorData | None = None, modern: bool
) -> None:
    """Write one JSON-RPC answer as the SDK's stateless JSON mode writes it: `application/json`;
    an error's HTTP status from the spec's table at 2026-07-28, 200 at the handshake versions."""
    status = 200
    if error is not None:
        if modern:
            status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
        payload = _error_payload(ident, error, modern=modern)
    else:
        payload = {"jsonrpc": "2.0", "id": ident, "result": result}
    await _write(send, status, _serialized(payload, modern=modern))


def _error_payload(ident: Any, error: ErrorData, *, modern: bool) -> dict[str, Any]:
    """A JSON-RPC error answer as the SDK writes it for the peer's generation."""
    if modern:
        dumped = error.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        dumped = error.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return {"jsonrpc": "2.0", "id": ident, "error": dumped}


async def _answer(server: Server[Any], runtime: Runtime, plan: CallPlan, channel: SseAnswer) -> dict[str, Any]:
    """The whole JSON-RPC answer to a streamed `tools/call`: the executor's result shaped for the peer's
    version, or the error the JSON answer would carry."""
    try:
        result = await runtime.executor.execute(plan, channel)
        wire = _shaped(server, "tools/call", plan.version, result, modern=plan.modern)
        return {"jsonrpc": "2.0", "id": plan.request_id, "result": wire}
    except Exception as exc:
        return _error_payload(plan.request_id, _error_data(exc, modern=plan.modern), modern=plan.modern)


def _serialized(payload: dict[str, Any], *, modern: bool) -> list[bytes]:
    """`payload` as the bytes of its answer, a large result in pieces (`gateway/http/json_pieces.py`); the SDK's
    2026-07-28 entry writes `json.dumps` (ASCII, compact) where `to_json` is not ASCII."""
    return answer_pieces(payload, modern=modern)


async def _write(send: Send, status: int, pieces: list[bytes]) -> None:
    """An `application/json` answer of `pieces`, each written under the server's flow control and let go once sent."""
    length = sum(len(piece) for piece in pieces)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(length).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    last = len(pieces) - 1
    for i in range(len(pieces)):
        piece, pieces[i] = pieces[i], b""
        await send({"type": "http.response.body", "body": piece, "more_body": i < last})
        del piece
