"""`tools/call` and `tools/list` on a pooled Streamable HTTP session, sent over `_http1`, not the SDK transport.

A pooled call through `mcp.Client` crosses the client's dispatcher (memory streams, a pending-result
stream, a task per request) and the Streamable HTTP transport (a task group per message, `httpx2`,
an `EventSource` over text decoders): about 2 ms of CPU per call, more than the upstream itself
spends on it. This module swaps only the wire under the two requests the pool sends all the time.
Once a session is open (either protocol generation), its `ClientSession` keeps its own dispatcher
for everything else (initialize or server/discover, notifications, the GET listener, DELETE on
close), but `tools/call` and `tools/list` go through `FastCalls`,
which posts the JSON-RPC request on a keep-alive `Http1Origin` connection and reads the JSON or
SSE answer itself. Everything above the wire is still the SDK's: the request is built, stamped,
and its result validated (the negotiated version's schema, the tool's output schema) by
`ClientSession` (its stamp writes the `_meta` envelope and, at 2026-07-28, `Mcp-Method`,
`Mcp-Name` and the `Mcp-Param-*` headers from the tool's listed input schema; `call_upstream_tool`,
`list_tools`); server requests met on the answer stream (ping, sampling, elicitation, roots) are
answered by the session's own `_on_request`, and notifications go to its `_on_notify`
(so `tools/list_changed` still clears the pool's listing cache).

Where the wire path differs from `streamable_http_client`, it does what that transport does: the
same headers, 202 and error-status answers mapped to the same JSON-RPC errors, the same SSE
parser and event-size limit, the same resumption (GET with `Last-Event-ID`, the same attempts
and delays) when a stream ends without an answer, and a courtesy `notifications/cancelled` when
the caller gives up. A redirect is handed back to the SDK path whole (the server did not process
the request). `tests/connections/client/test_fast_calls.py` runs each case both ways against real
upstreams and requires the same result or error.

Used only where it applies (`fast_calls_apply`): Streamable HTTP, no proxy in the environment, no
userinfo in the URL, an asyncio event loop. At 2026-07-28 there is no session id, a 404 without a
JSON-RPC body is METHOD_NOT_FOUND, and a caller's cancel closes the POST instead of posting
`notifications/cancelled` (the 2026 wire has no client-to-server notifications), as in the SDK.
An OAuth connection's `httpx2.Auth` runs on this wire as httpx2 runs it (`FastCalls.send`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pydantic_core
from mcp import Client
from mcp.shared._otel import inject_trace_context, otel_span  # what the SDK's dispatcher traces with
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry import context as otel_context
from opentelemetry.propagate import inject
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import ValidationError

from .._exceptions import ConnectionsError, ResultTooLarge
from ..project._definitions import ConnectionDefinition
from ._fast_answers import PROGRESS, AnswerReader, plain_message_result, sse_parser_found
from ._keepalive import DRAIN_BYTES, DRAIN_SECONDS
from ._passthrough import result_text
from ._tracing import UPSTREAM, client_span_attributes, tracing_enabled
from ._transports._http1 import BodyTooLarge, Http1Origin, Http1Response, shared_ssl_context, valid_header_value
from ._wire import WireAnswer

__all__ = ["FastCalls", "client_span", "fast_calls_apply", "install_fast_calls"]

logger = logging.getLogger(__name__)

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
_FAST_METHODS = frozenset({"tools/call", "tools/list"})
"""The two requests the pool sends on every call and every turn build; anything else stays on the SDK transport."""
_MERGED_HEADERS_KEPT = 256
_TAKEN_OPTIONS = frozenset({"headers", "on_progress"})
"""Call options the fast leg honours; a call with any other (a timeout, resumption) keeps the SDK path."""
_CANCEL_WRITE_TIMEOUT = 5.0
_SET_BY_THE_WIRE = frozenset({"host", "content-length"})
"""Headers `httpx2.Request` adds that `Http1Origin.request` writes itself."""
_USER_AGENT = f"python-httpx2/{httpx2.__version__}"
"""What the SDK path's httpx2 client sends, so an upstream sees one client whichever leg a call takes."""


def fast_calls_apply(defn: ConnectionDefinition, headers: Mapping[str, str]) -> bool:
    """Whether `defn`'s pooled session may send `tools/call` over `_http1` (see the module docstring)."""
    if not sse_parser_found() or defn.kind != "http" or defn.url is None:
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
    defn: ConnectionDefinition,
    *,
    headers: Mapping[str, str],
    session_id: str | None,
    http_status: list[int],
    auth: httpx2.Auth | None = None,
) -> FastCalls | None:
    """Route `client`'s `tools/call` and `tools/list` over keep-alive connections to `defn.url` (none is opened
    before the first call); None (and nothing changed) where the session cannot take it."""
    session = client.session
    inner = getattr(session, "_dispatcher", None)
    if inner is None or not hasattr(session, "_on_request") or not hasattr(session, "_on_notify"):
        return None  # pragma: no cover - a future SDK reshaped its session
    assert defn.url is not None
    origin = Http1Origin(
        defn.url,
        ssl_context=shared_ssl_context() if defn.url.startswith("https:") else None,
        connect_timeout=defn.timeouts.connect,
    )
    base = {k.lower(): v for k, v in headers.items()}
    base.setdefault("user-agent", _USER_AGENT)
    base["accept"] = "application/json, text/event-stream"
    base["content-type"] = "application/json"
    modern = client.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
    if session_id and not modern:
        base["mcp-session-id"] = session_id
    # The session's stamp sets it on every request too (and, at 2026-07-28, `Mcp-Method`, `Mcp-Name`
    # and `Mcp-Param-*`, which arrive as the call's own headers); here it also covers resumption GETs.
    base["mcp-protocol-version"] = client.protocol_version
    fast = FastCalls(inner, session, origin, base, http_status, auth, modern=modern, max_body=defn.max_result_bytes)
    session._dispatcher = fast  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]  # by delegation
    return fast


class _Redirected(ConnectionsError):
    """The upstream redirected the POST: the request was not processed, so the SDK path sends it."""


class FastCalls:
    """A session dispatcher whose `tools/call` and `tools/list` go over `_http1`; the rest is the SDK's, unchanged.

    A `Wire` (`client/_wire.py`): `answer` gives a result with its bytes. Reading an answer stream (SSE,
    resumption, server requests met on it) is its `AnswerReader`'s job."""

    def __init__(
        self,
        inner: Any,
        session: Any,
        origin: Http1Origin,
        headers: dict[str, str],
        http_status: list[int],
        auth: httpx2.Auth | None = None,
        *,
        modern: bool = False,
        max_body: int | None = None,
    ) -> None:
        self._max_body = max_body
        """The connection's `max_result_bytes`: a larger answer is refused as it arrives."""
        self._inner = inner
        self._modern = modern
        """The session speaks 2026-07-28: no session id, and a call is cancelled by closing its POST."""
        self._session = session
        self._origin = origin
        self._headers = headers
        self._http_status = http_status
        self._auth = auth
        self._reader = AnswerReader(session, headers, max_body, self.send)
        self._ids = itertools.count(1)
        self.on = True
        """False once the upstream redirected a request: the session's calls all take the SDK transport."""
        self._merged: dict[tuple[tuple[str, str], ...], list[tuple[str, str]]] = {}
        """`_request_headers` by the call's extra headers (a tool's stamp is the same on every call)."""

    routes_by_stream = True
    """A call's notifications come on its own answer stream and go to that call (`client/_call_routing.py`)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """The SDK dispatcher's entry (what `ClientSession` calls): the result alone."""
        if not self.on or method not in _FAST_METHODS or kwargs or (opts and not _TAKEN_OPTIONS.issuperset(opts)):
            return await self._inner.send_raw_request(method, params, opts, **kwargs)
        return (await self._call(method, params, opts or {})).result

    def answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> Awaitable[WireAnswer]:
        """`Wire.answer`: over `_http1` where this wire takes the request, else by the SDK's dispatcher."""
        # A plain function handing back the coroutine to await: no frame of its own on the hot path.
        if not self.on or method not in _FAST_METHODS or (opts and not _TAKEN_OPTIONS.issuperset(opts)):
            return self._sdk_answer(method, params, opts)
        return self._call(method, params, opts)

    async def _sdk_answer(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> WireAnswer:
        return WireAnswer(await self._inner.send_raw_request(method, params, opts))

    async def aclose(self) -> None:
        """Close the wire's keep-alive connections (the session closes its own transport)."""
        await self._origin.aclose()

    async def _call(self, method: str, params: Mapping[str, Any] | None, opts: Mapping[str, Any]) -> WireAnswer:
        # String ids in their own namespace: never equal to an id the SDK's dispatcher mints on this session.
        request_id = f"agent-sdk-{next(self._ids)}"
        out_params = dict(params or {})
        out_meta = dict(out_params.get("_meta") or {})
        tracing = tracing_enabled()  # without a tracer provider the span records nothing: skip it
        carrier: dict[str, str] = {}
        with client_span(method, out_params.get("name"), request_id) if tracing else nullcontext() as span:
            if tracing:  # the same context in `_meta` and the headers (client/_tracing.py), written once
                inject(carrier)
                out_meta.update(carrier)
            elif otel_context.get_current():  # an empty context gives the propagators nothing to write
                inject_trace_context(out_meta)  # baggage propagates without a tracer provider too
            on_progress = opts.get("on_progress")
            if on_progress is not None:  # as the SDK's dispatcher: the request id doubles as the progress token
                out_meta["progressToken"] = request_id
            if out_meta:
                out_params["_meta"] = out_meta
            else:
                out_params.pop("_meta", None)
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if out_params:
                message["params"] = out_params
            body = pydantic_core.to_json(message)
            headers = self._request_headers(opts.get("headers"))
            if carrier:
                headers = [*headers, *carrier.items()]
            await anyio.lowlevel.checkpoint_if_cancelled()
            progress = None if on_progress is None else PROGRESS.set((request_id, on_progress))
            try:
                outcome = await self._exchange(headers, body)
            except anyio.get_cancelled_exc_class():
                if not self._modern:  # at 2026-07-28 the closed POST is the signal (its connection is dropped)
                    await self._courtesy_cancel(request_id)
                raise
            except _Redirected:
                self._switch_off()
                outcome = None  # not processed: the SDK transport sends it, after this span
            finally:
                if progress is not None:
                    PROGRESS.reset(progress)
            if isinstance(outcome, ErrorData):
                if span is not None:
                    code = str(outcome.code)
                    span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                    span.set_status(StatusCode.ERROR, outcome.message)
                raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
            if outcome is not None:
                return outcome
        return WireAnswer(await self._inner.send_raw_request(method, params, opts))

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

    async def send(self, method: str, headers: list[tuple[str, str]], body: bytes = b"") -> Http1Response:
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

    async def _exchange(self, headers: Iterable[tuple[str, str]], body: bytes) -> WireAnswer | ErrorData:
        """POST `body`; the outcome from its answer, as `StreamableHTTPTransport._handle_post_request` maps it.

        Raises `_Redirected` for a 3xx (the request was not processed)."""
        headers = list(headers)
        if self._auth is None:  # `send` without its frame: the common case
            response = await self._origin.request("POST", headers, body)
        else:
            response = await self.send("POST", headers, body)
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
                try:  # parsed as it arrives: a large answer's bytes and objects are never whole at once
                    data, text = await response.read_json(self._max_body)
                except BodyTooLarge:  # the rest is not read; the connection is dropped, the session stays
                    return ErrorData(code=INTERNAL_ERROR, message=ResultTooLarge.transport_note(self._max_body or 0))
                except ValueError as exc:
                    return ErrorData(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}")
                result = plain_message_result(data)
                if result is not None:
                    return WireAnswer(result, None if text is None else result_text(text))
                del text
                try:
                    message = jsonrpc_message_adapter.validate_python(data, by_name=False)
                except ValidationError as exc:
                    return ErrorData(code=PARSE_ERROR, message=f"Failed to parse JSON response: {exc}")
                outcome = await self._reader.message(message, headers)
                if outcome is None:
                    return ErrorData(code=INTERNAL_ERROR, message="the upstream's JSON response carried no answer")
                return outcome
            if content_type.startswith("text/event-stream"):
                return await self._reader.stream(response, headers)
            return ErrorData(code=INVALID_REQUEST, message=f"Unexpected content type: {content_type}")
        finally:
            response.release()


def client_span(method: str, target: object, request_id: str) -> AbstractContextManager[Any]:
    """A fast-wire request's client span, as the SDK's dispatcher opens it; for a marked upstream's request
    (`UPSTREAM`) named and labelled up front (`client_span_attributes`: no span processor pass)."""
    target = target if isinstance(target, str) else None
    attributes = {"mcp.method.name": method, "jsonrpc.request.id": request_id}
    name = f"{method} {target}" if target is not None else method
    upstream = UPSTREAM.get()
    if upstream is None:
        return otel_span(f"MCP send {name}", kind=SpanKind.CLIENT, attributes=attributes)
    attributes.update(client_span_attributes(upstream, method, target))
    return otel_span(name, kind=SpanKind.CLIENT, attributes=attributes)
