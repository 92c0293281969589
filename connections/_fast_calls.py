"""`tools/call` and `tools/list` on a pooled Streamable HTTP session, sent over `_http1`, not the SDK transport.

A pooled call through `mcp.Client` crosses the client's dispatcher (memory streams, a pending-result
stream, a task per request) and the Streamable HTTP transport (a task group per message, `httpx2`,
an `EventSource` over text decoders): about 2 ms of CPU per call, more than the upstream itself
spends on it. This module swaps only the wire under the two requests the pool sends all the time.
Once a handshake-era session is open, its `ClientSession` keeps its own dispatcher for everything
else (initialize, notifications, the GET listener, DELETE on close), but `tools/call` and
`tools/list` go through `FastCalls`,
which posts the JSON-RPC request on a keep-alive `Http1Origin` connection and reads the JSON or
SSE answer itself. Everything above the wire is still the SDK's: the request is built, stamped,
and its result validated (the negotiated version's schema, the tool's output schema) by
`ClientSession` (`call_tool`, `list_tools`); server requests met on the answer stream (ping, sampling, elicitation,
roots) are answered by the session's own `_on_request`, and notifications go to its `_on_notify`
(so `tools/list_changed` still clears the pool's listing cache).

Where the wire path differs from `streamable_http_client`, it does what that transport does: the
same headers, 202 and error-status answers mapped to the same JSON-RPC errors, the same SSE
parser and event-size limit, the same resumption (GET with `Last-Event-ID`, the same attempts
and delays) when a stream ends without an answer, and a courtesy `notifications/cancelled` when
the caller gives up. A redirect is handed back to the SDK path whole (the server did not process
the request). `tests/connections/test_fast_calls.py` runs each case both ways against real
upstreams and requires the same result or error.

Used only where it applies (`fast_calls_apply`): Streamable HTTP, no proxy in the environment, no
userinfo in the URL, an asyncio event loop, and a session that negotiated a handshake-era version.
An OAuth connection's `httpx2.Auth` runs on this wire as httpx2 runs it (`FastCalls._send`).
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import logging
import os
from collections.abc import Awaitable, Iterable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pydantic_core
from mcp import Client
from mcp.client.streamable_http import (
    DEFAULT_MAX_SSE_EVENT_SIZE,
    DEFAULT_RECONNECTION_DELAY_MS,
    MAX_RECONNECTION_ATTEMPTS,
)
from mcp.shared._otel import inject_trace_context, otel_span  # what the SDK's dispatcher traces with
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER, encode_header_value
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError

from ._definitions import ConnectionDefinition
from ._http1 import Http1Origin, Http1Response, valid_header_value
from ._keepalive import DRAIN_BYTES, DRAIN_SECONDS
from ._tracing import tracing_enabled

try:  # httpx2's own SSE parser, so both wires parse alike; if a release moves it, the SDK path serves
    from httpx2._sse import _SSEParser  # pyright: ignore[reportPrivateUsage]
except ImportError:  # pragma: no cover
    _SSEParser = None  # type: ignore[assignment,misc]

__all__ = ["FastCalls", "fast_calls_apply", "install_fast_calls"]

logger = logging.getLogger(__name__)

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_FAST_METHODS = frozenset({"tools/call", "tools/list"})
_MERGED_HEADERS_KEPT = 256
_UTF8 = codecs.getincrementaldecoder("utf-8")
"""The two requests the pool sends on every call and every turn build; anything else stays on the SDK transport."""
_TAKEN_OPTIONS = frozenset({"headers"})
"""Call options the fast leg honours; a call with any other (a timeout, progress, resumption) keeps the SDK path."""
_CANCEL_WRITE_TIMEOUT = 5.0
_SET_BY_THE_WIRE = frozenset({"host", "content-length"})
"""Headers `httpx2.Request` adds that `Http1Origin.request` writes itself."""
_USER_AGENT = f"python-httpx2/{httpx2.__version__}"
"""What the SDK path's httpx2 client sends, so an upstream sees one client whichever leg a call takes."""


def fast_calls_apply(defn: ConnectionDefinition, headers: Mapping[str, str]) -> bool:
    """Whether `defn`'s pooled session may send `tools/call` over `_http1` (see the module docstring)."""
    if _SSEParser is None or defn.kind != "http" or defn.url is None:
        return False
    parts = urlsplit(defn.url)
    if parts.scheme not in ("http", "https") or parts.username is not None or parts.password is not None:
        return False
    if any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES):
        return False  # httpx2 honours these; this leg does not speak to proxies
    if not all(valid_header_value(k) and valid_header_value(v) for k, v in headers.items()):
        return False  # the SDK path reports the bad header itself
    try:
        asyncio.get_running_loop()  # `_http1` is asyncio protocols: under trio the SDK path serves
    except RuntimeError:
        return False
    return True


def install_fast_calls(
    client: Client,
    origin: Http1Origin,
    *,
    headers: Mapping[str, str],
    session_id: str | None,
    http_status: list[int],
    auth: httpx2.Auth | None = None,
) -> FastCalls | None:
    """Route `client`'s `tools/call` over `origin`; None (and nothing changed) where it does not apply."""
    session = client.session
    inner = getattr(session, "_dispatcher", None)
    if inner is None or not hasattr(session, "_on_request") or not hasattr(session, "_on_notify"):
        return None  # pragma: no cover - a future SDK reshaped its session
    if client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        return None  # 2026-07-28 calls carry Mcp-Param-* headers and their own exchange: the SDK's
    base = {k.lower(): v for k, v in headers.items()}
    base.setdefault("user-agent", _USER_AGENT)
    base["accept"] = "application/json, text/event-stream"
    base["content-type"] = "application/json"
    if session_id:
        base["mcp-session-id"] = session_id
    base["mcp-protocol-version"] = client.protocol_version
    fast = FastCalls(inner, session, origin, base, http_status, auth)
    session._dispatcher = fast  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]  # by delegation
    return fast


_RESPONSE_KEYS = frozenset({"jsonrpc", "id", "result"})


def _plain_result(data: str | bytes) -> dict[str, Any] | None:
    """The result of `data` when it is a plain JSON-RPC response, else None (then the SDK's adapter decides).

    Plain: a JSON object of exactly `jsonrpc` "2.0", a string or (non-bool) integer `id` and an
    object `result`: the message union takes it as a `JSONRPCResponse` with that result, so the
    adapter's verdict is known without running it. Anything else (an error, a request, a
    notification, malformed JSON) goes to the adapter, for the same verdict and message as before.
    """
    try:
        message = pydantic_core.from_json(data)
    except ValueError:
        return None
    if type(message) is not dict or len(message) != len(_RESPONSE_KEYS) or not _RESPONSE_KEYS.issuperset(message):
        return None
    result = message["result"]
    if message["jsonrpc"] != "2.0" or type(message["id"]) not in (str, int) or type(result) is not dict:
        return None
    return result


@dataclass(slots=True)
class _Context:
    """The part of a dispatch context the session's `_on_request` / `_on_notify` read."""

    request_id: RequestId | None


@dataclass(slots=True)
class _Stream:
    """Resumption state of one call's answer stream."""

    last_event_id: str | None = None
    retry_ms: int | None = None


class _Redirected(Exception):
    """The upstream redirected the POST: the request was not processed, so the SDK path sends it."""


class FastCalls:
    """A session dispatcher whose `tools/call` and `tools/list` go over `_http1`; the rest is the SDK's, unchanged."""

    def __init__(
        self,
        inner: Any,
        session: Any,
        origin: Http1Origin,
        headers: dict[str, str],
        http_status: list[int],
        auth: httpx2.Auth | None = None,
    ) -> None:
        self._inner = inner
        self._session = session
        self._origin = origin
        self._headers = headers
        self._http_status = http_status
        self._auth = auth
        self._ids = itertools.count(1)
        self.on = True
        """False once the upstream redirected a request: the session's calls all take the SDK transport."""
        self._merged: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = {}
        """`_request_headers` by the call's extra headers (a tool's stamp is the same on every call)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> Awaitable[dict[str, Any]]:
        # A plain function handing back the coroutine to await: no frame of its own on the hot path.
        if not self.on or method not in _FAST_METHODS or kwargs or (opts and not _TAKEN_OPTIONS.issuperset(opts)):
            return self._inner.send_raw_request(method, params, opts, **kwargs)
        return self._call(method, params, opts or {})

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Awaitable[dict[str, Any]]:
        """`tools/call` as `ClientSession.call_tool` sends it (the same params, the same stamped
        headers), the result as the raw dict `ClientSession.send_request` validates. (A plain
        function handing back the coroutine: no frame of its own on the hot path.)"""
        params = {"name": name, "arguments": arguments}
        stamp = {
            MCP_PROTOCOL_VERSION_HEADER: self._headers["mcp-protocol-version"],
            MCP_NAME_HEADER: encode_header_value(name),
        }
        return self.send_raw_request("tools/call", params, {"headers": stamp})

    async def _call(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> dict[str, Any]:
        # String ids in their own namespace: never equal to an id the SDK's dispatcher mints on this session.
        request_id = f"agent-sdk-{next(self._ids)}"
        out_params = dict(params or {})
        out_meta = dict(out_params.get("_meta") or {})
        target = out_params.get("name")
        span_name = f"MCP send {method}{f' {target}' if isinstance(target, str) else ''}"
        attributes = {"mcp.method.name": method, "jsonrpc.request.id": request_id}
        tracing = tracing_enabled()  # without a tracer provider the span records nothing: skip it
        with otel_span(span_name, kind=SpanKind.CLIENT, attributes=attributes) if tracing else nullcontext() as span:
            if tracing or otel_context.get_current():  # an empty context gives the propagators nothing to write
                inject_trace_context(out_meta)  # baggage propagates without a tracer provider too
            if out_meta:
                out_params["_meta"] = out_meta
            else:
                out_params.pop("_meta", None)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if out_params:
                message["params"] = out_params
            body = pydantic_core.to_json(message)
            headers = self._request_headers(opts.get("headers"))
            await anyio.lowlevel.checkpoint_if_cancelled()
            try:
                outcome = await self._exchange(headers, body)
            except anyio.get_cancelled_exc_class():
                await self._courtesy_cancel(request_id)
                raise
            except _Redirected:
                self._switch_off()
                outcome = None  # not processed: the SDK transport sends it, after this span
            if isinstance(outcome, ErrorData):
                if span is not None:
                    code = str(outcome.code)
                    span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                    span.set_status(StatusCode.ERROR, outcome.message)
                raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
            if outcome is not None:
                return outcome
        return await self._inner.send_raw_request(method, params, opts)

    def _switch_off(self) -> None:
        """Hand the session back to the SDK's dispatcher for good: a redirecting upstream would cost
        every call two requests (the redirect here, then the SDK's), and only the SDK follows one."""
        if self.on:
            self.on = False
            self._session._dispatcher = self._inner
            logger.info("the upstream redirected a request: this session's calls take the SDK transport")

    def _request_headers(self, extra: Mapping[str, str] | None) -> Iterable[tuple[str, str]]:
        if not extra:
            return self._headers.items()
        key = tuple(extra.items())
        found = self._merged.get(key)
        if found is not None:
            return found
        merged = dict(self._headers)
        for name, value in extra.items():
            if not (valid_header_value(name) and valid_header_value(value)):
                raise httpx2.LocalProtocolError(f"invalid value for request header {name!r}")
            merged[name.lower()] = value
        if len(self._merged) >= _MERGED_HEADERS_KEPT:
            self._merged.clear()
        found = self._merged[key] = list(merged.items())
        return found

    async def _courtesy_cancel(self, request_id: str) -> None:
        # As the SDK's dispatcher does for a caller-cancelled request: tell the server to stop (the
        # SDK transport posts it), shielded and bounded so the caller's cancellation still completes.
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WRITE_TIMEOUT):
            try:
                await self._inner.notify(
                    "notifications/cancelled", {"requestId": request_id, "reason": "caller cancelled"}
                )
            except Exception:
                logger.debug("courtesy cancel for %r not sent", request_id, exc_info=True)

    # -- the wire -----------------------------------------------------------------------------

    async def _send(self, method: str, headers: list[tuple[str, str]], body: bytes = b"") -> Http1Response:
        """One request on the origin; with an `httpx2.Auth` (OAuth), through its flow as httpx2 runs it.

        The flow sets `Authorization`, sees each answer's status and headers, and may ask for one more
        try (a refreshed token after a 401, a step-up after a 403): the same flow, the same token store
        and locks, as on the SDK path. An answer the flow retries is drained and dropped.
        """
        if self._auth is None:
            return await self._origin.request(method, headers, body)
        request = httpx2.Request(method, self._origin.url, headers=headers, content=body)
        flow = self._auth.async_auth_flow(request)
        try:
            request = await flow.__anext__()
            while True:
                sent = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _SET_BY_THE_WIRE]
                response = await self._origin.request(method, sent, body)
                seen = httpx2.Response(response.status, headers=response.header_items(), request=request)
                try:
                    request = await flow.asend(seen)
                except StopAsyncIteration:
                    return response
                except BaseException:
                    response.release()  # the flow gave up (no token, a login it cannot do): free the connection
                    raise
                await response.finish(seconds=DRAIN_SECONDS, max_bytes=DRAIN_BYTES)
        finally:
            await flow.aclose()

    async def _exchange(self, headers: Iterable[tuple[str, str]], body: bytes) -> dict[str, Any] | ErrorData:
        """POST `body`; the outcome from its answer, as `StreamableHTTPTransport._handle_post_request` maps it.

        Raises `_Redirected` for a 3xx (the request was not processed)."""
        headers = list(headers)
        if self._auth is None:  # `_send` without its frame: the common case
            response = await self._origin.request("POST", headers, body)
        else:
            response = await self._send("POST", headers, body)
        try:
            status = response.status
            self._http_status[:] = [status]  # every answer's: an error names the status it came with
            if status == 202:
                return ErrorData(code=INVALID_REQUEST, message="server answered a request with 202 Accepted")
            if 300 <= status < 400:
                raise _Redirected
            content_type = response.header("content-type").lower()
            if status >= 400:
                if content_type.startswith("application/json"):
                    try:
                        parsed = jsonrpc_message_adapter.validate_json(await response.read(), by_name=False)
                    except (httpx2.TransportError, ValidationError):
                        parsed = None
                    if isinstance(parsed, JSONRPCError):
                        return parsed.error
                if status == 404 and "mcp-session-id" not in self._headers:
                    # As the SDK transport reads it: without a session, 404 is HTTP's "no such method".
                    return ErrorData(code=METHOD_NOT_FOUND, message="Not Found")
                if status == 404:
                    return ErrorData(code=INVALID_REQUEST, message="Session terminated")
                return ErrorData(code=INTERNAL_ERROR, message="Server returned an error response")
            if content_type.startswith("application/json"):
                data = await response.read()
                result = _plain_result(data)
                if result is not None:
                    return result
                try:
                    message = jsonrpc_message_adapter.validate_json(data, by_name=False)
                except ValidationError as exc:
                    return ErrorData(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}")
                outcome = await self._message(message, headers)
                if outcome is None:
                    return ErrorData(code=INTERNAL_ERROR, message="the upstream's JSON response carried no answer")
                return outcome
            if content_type.startswith("text/event-stream"):
                return await self._stream(response, headers)
            return ErrorData(code=INVALID_REQUEST, message=f"Unexpected content type: {content_type}")
        finally:
            response.release()

    async def _stream(self, response: Http1Response, headers: list[tuple[str, str]]) -> dict[str, Any] | ErrorData:
        stream = _Stream()
        try:
            outcome = await self._events(response, stream, headers)
        except httpx2.SSEError as exc:
            return ErrorData(code=CONNECTION_CLOSED, message=f"SSE stream failed: {exc}")
        except httpx2.TransportError:
            logger.debug("SSE stream ended", exc_info=True)
            outcome = None
        if outcome is not None:
            await response.finish(seconds=DRAIN_SECONDS, max_bytes=DRAIN_BYTES)  # the connection stays reusable
            return outcome
        if stream.last_event_id is None:
            return ErrorData(code=CONNECTION_CLOSED, message="SSE stream ended without a response")
        response.release()
        return await self._resume(stream, headers)

    async def _resume(self, stream: _Stream, headers: list[tuple[str, str]]) -> dict[str, Any] | ErrorData:
        """`StreamableHTTPTransport._handle_reconnection`: GET with `Last-Event-ID` until the answer comes."""
        attempt = 0
        # The transport's GET: the session's headers (not the call's own), as `_prepare_headers` builds them.
        get_headers = [*self._headers.items(), ("cache-control", "no-store")]
        while True:
            if attempt >= MAX_RECONNECTION_ATTEMPTS:
                return ErrorData(
                    code=CONNECTION_CLOSED, message="SSE stream ended and reconnection attempts were exhausted"
                )
            delay_ms = stream.retry_ms if stream.retry_ms is not None else DEFAULT_RECONNECTION_DELAY_MS
            await anyio.sleep(delay_ms / 1000.0)
            assert stream.last_event_id is not None
            try:
                response = await self._send("GET", [*get_headers, ("last-event-id", stream.last_event_id)])
            except httpx2.TransportError:
                attempt += 1
                continue
            try:
                media = response.header("content-type").partition(";")[0].strip().lower()
                if response.status >= 300 or media != "text/event-stream":
                    attempt += 1  # raise_for_status, or EventSource's content-type check, in the SDK
                    continue
                try:
                    outcome = await self._events(response, stream, headers)
                except httpx2.SSEError as exc:
                    return ErrorData(code=CONNECTION_CLOSED, message=f"SSE stream failed: {exc}")
                except httpx2.TransportError:
                    attempt += 1
                    continue
                if outcome is not None:
                    await response.finish(seconds=DRAIN_SECONDS, max_bytes=DRAIN_BYTES)
                    return outcome
                attempt = 0  # the stream ended again without the answer: reconnect afresh
            finally:
                response.release()

    async def _events(
        self, response: Http1Response, stream: _Stream, headers: list[tuple[str, str]]
    ) -> dict[str, Any] | ErrorData | None:
        """Read SSE events until the call's answer (returned); None when the stream ends first."""
        assert _SSEParser is not None
        parser = _SSEParser(DEFAULT_MAX_SSE_EVENT_SIZE)
        decoder = _UTF8(errors="replace")
        while chunk := await response.next_chunk():
            for sse in parser.decode(decoder.decode(chunk)):
                outcome = await self._event(sse, stream, headers)
                if outcome is not None:
                    return outcome
        for sse in itertools.chain(parser.decode(decoder.decode(b"", final=True)), parser.flush()):
            outcome = await self._event(sse, stream, headers)
            if outcome is not None:
                return outcome
        return None

    async def _event(
        self, sse: Any, stream: _Stream, headers: list[tuple[str, str]]
    ) -> dict[str, Any] | ErrorData | None:
        """One SSE event, as `StreamableHTTPTransport._handle_sse_event` takes it: the answer, or None."""
        if sse.id:
            stream.last_event_id = sse.id
        if sse.retry is not None:
            stream.retry_ms = sse.retry
        if sse.event != "message" or not sse.data:
            return None  # another event type, or a priming event (its id is kept above)
        result = _plain_result(sse.data)
        if result is not None:
            return result
        try:
            message = jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
        except ValidationError as exc:
            return ErrorData(code=PARSE_ERROR, message=f"Failed to parse SSE message: {exc}")
        return await self._message(message, headers)

    async def _message(self, message: Any, headers: list[tuple[str, str]]) -> dict[str, Any] | ErrorData | None:
        """The answer when `message` is one; a notification or server request is handled and gives None."""
        if isinstance(message, JSONRPCResponse):
            return message.result
        if isinstance(message, JSONRPCError):
            return message.error
        if isinstance(message, JSONRPCNotification):
            if message.method not in ("notifications/progress", "notifications/cancelled"):
                # Progress and cancellation belong to the SDK's dispatcher (no progress callback is
                # registered for pooled calls; nothing of ours runs on the server's behalf).
                await self._session._on_notify(_Context(None), message.method, message.params)  # pyright: ignore[reportPrivateUsage]
            return None
        assert isinstance(message, JSONRPCRequest)
        await self._reply(message, headers)
        return None

    async def _reply(self, request: JSONRPCRequest, headers: list[tuple[str, str]]) -> None:
        """Answer a server request met on the answer stream, with the session's own handler, as the SDK does."""
        reply: JSONRPCResponse | JSONRPCError
        try:
            result = await self._session._on_request(_Context(request.id), request.method, request.params)  # pyright: ignore[reportPrivateUsage]
            reply = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
        except Exception as exc:
            error = handler_exception_to_error_data(exc) or ErrorData(code=INTERNAL_ERROR, message=str(exc))
            reply = JSONRPCError(jsonrpc="2.0", id=request.id, error=error)
        body = reply.model_dump_json(by_alias=True, exclude_unset=True).encode()
        try:
            answer = await self._send("POST", headers, body)
        except httpx2.TransportError:
            logger.debug("could not answer the server's %s request", request.method, exc_info=True)
            return
        await answer.finish(seconds=DRAIN_SECONDS, max_bytes=DRAIN_BYTES)
