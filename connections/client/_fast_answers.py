"""Reading the answer to a fast-wire POST (`client/_fast_calls.py`) as the SDK's Streamable HTTP transport reads it.

An SSE answer stream is parsed with httpx2's own SSE parser under the SDK's event-size limit; a
stream that ends without the answer is resumed with `Last-Event-ID` GETs (the SDK's attempts and
delays); a notification met on the stream goes to the session's `_on_notify`, and a server request
(ping, sampling, elicitation, roots) to its `_on_request`, whose reply is posted back.
`FastCalls` holds one `AnswerReader` and hands it the request function it sends with (`FastCalls.send`,
with the connection's `httpx2.Auth` flow): the reader sends its resumption GETs and replies through it.
"""

from __future__ import annotations

import codecs
import contextvars
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import pydantic_core
from mcp.client.streamable_http import (
    DEFAULT_MAX_SSE_EVENT_SIZE,
    DEFAULT_RECONNECTION_DELAY_MS,
    MAX_RECONNECTION_ATTEMPTS,
)
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from .._call_context import current_call
from ._call_routing import stream_log
from ._keepalive import DRAIN_BYTES, DRAIN_SECONDS
from ._passthrough import result_text
from ._transports._http1 import Http1Response
from ._wire import WireAnswer

try:  # httpx2's own SSE parser, so both wires parse alike; if a release moves it, the SDK path serves
    from httpx2._sse import _SSEParser  # pyright: ignore[reportPrivateUsage]
except ImportError:  # pragma: no cover
    _SSEParser = None

__all__ = ["PROGRESS", "AnswerReader", "Send", "plain_message_result", "plain_result", "sse_parser_found"]

logger = logging.getLogger(__name__)

_UTF8 = codecs.getincrementaldecoder("utf-8")


def sse_parser_found() -> bool:
    """Whether httpx2's SSE parser is where this module expects it (without it the fast wire does not apply)."""
    return _SSEParser is not None


_RESPONSE_KEYS = frozenset({"jsonrpc", "id", "result"})


def plain_result(data: str | bytes) -> dict[str, Any] | None:
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
    return plain_message_result(message)


def plain_message_result(message: Any) -> dict[str, Any] | None:
    """`plain_result` of a message already parsed from JSON."""
    if type(message) is not dict or len(message) != len(_RESPONSE_KEYS) or not _RESPONSE_KEYS.issuperset(message):
        return None
    result = message["result"]
    if message["jsonrpc"] != "2.0" or type(message["id"]) not in (str, int) or type(result) is not dict:
        return None
    return result


PROGRESS: contextvars.ContextVar[tuple[str, ProgressFnT] | None] = contextvars.ContextVar(
    "agent_sdk_fast_progress", default=None
)
"""The fast call this task is reading the answer of, when it asked for progress: its token and callback."""


async def _progress(params: Any) -> None:
    """A `notifications/progress` on a call's answer stream, to the call's callback when the token is its own."""
    wanted = PROGRESS.get()
    match params:
        case {"progressToken": str() as token, "progress": int() | float() as progress} if (
            wanted is not None and token == wanted[0] and not isinstance(progress, bool)
        ):
            total, message = params.get("total"), params.get("message")
            await wanted[1](
                float(progress),
                float(total) if isinstance(total, int | float) and not isinstance(total, bool) else None,
                message if isinstance(message, str) else None,
            )
        case _:
            pass


@dataclass(slots=True)
class _Context:
    """The part of a dispatch context the session's `_on_request` / `_on_notify` read."""

    request_id: RequestId | None


@dataclass(slots=True)
class _Stream:
    """Resumption state of one call's answer stream."""

    last_event_id: str | None = None
    retry_ms: int | None = None


Send = Callable[[str, list[tuple[str, str]], bytes], Awaitable[Http1Response]]
"""One request on the connection's origin: method, headers, body (`FastCalls.send`)."""


class AnswerReader:
    """Reads the answer stream of a fast-wire POST: SSE events, resumption, and what the server sends on them."""

    def __init__(self, session: Any, headers: dict[str, str], max_body: int | None, send: Send) -> None:
        self._session = session
        """The SDK's `ClientSession`, whose `_on_notify` and `_on_request` handle what the server sends."""
        self._headers = headers
        """The session's own request headers (a resumption GET carries these, not a call's)."""
        self._max_body = max_body
        """The connection's `max_result_bytes`: one event is capped at the smaller of it and the SDK's 1 MiB."""
        self._send = send

    async def stream(self, response: Http1Response, headers: list[tuple[str, str]]) -> WireAnswer | ErrorData:
        """The call's answer from an SSE `response` (resumed with `Last-Event-ID` when the stream ends first)."""
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

    async def _resume(self, stream: _Stream, headers: list[tuple[str, str]]) -> WireAnswer | ErrorData:
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
                response = await self._send("GET", [*get_headers, ("last-event-id", stream.last_event_id)], b"")
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
    ) -> WireAnswer | ErrorData | None:
        """Read SSE events until the call's answer (returned); None when the stream ends first."""
        assert _SSEParser is not None
        parser = _SSEParser(min(DEFAULT_MAX_SSE_EVENT_SIZE, self._max_body or DEFAULT_MAX_SSE_EVENT_SIZE))
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

    async def _event(self, sse: Any, stream: _Stream, headers: list[tuple[str, str]]) -> WireAnswer | ErrorData | None:
        """One SSE event, as `StreamableHTTPTransport._handle_sse_event` takes it: the answer, or None."""
        if sse.id:
            stream.last_event_id = sse.id
        if sse.retry is not None:
            stream.retry_ms = sse.retry
        if sse.event != "message" or not sse.data:
            return None  # another event type, or a priming event (its id is kept above)
        result = plain_result(sse.data)
        if result is not None:
            return WireAnswer(result, result_text(sse.data.encode()))
        try:
            message = jsonrpc_message_adapter.validate_json(sse.data, by_name=False)
        except ValidationError as exc:
            return ErrorData(code=PARSE_ERROR, message=f"Failed to parse SSE message: {exc}")
        return await self.message(message, headers)

    async def message(self, message: Any, headers: list[tuple[str, str]]) -> WireAnswer | ErrorData | None:
        """The answer when `message` is one; a notification or server request is handled and gives None."""
        if isinstance(message, JSONRPCResponse):
            return WireAnswer(message.result)
        if isinstance(message, JSONRPCError):
            return message.error
        if isinstance(message, JSONRPCNotification):
            if message.method == "notifications/progress":
                await _progress(message.params)
            elif message.method == "notifications/message":
                stream_log(self._session, current_call(), message.params)  # this call's: never another's
            elif message.method != "notifications/cancelled":  # nothing of ours runs on the server's behalf
                await self._session._on_notify(_Context(None), message.method, message.params)
            return None
        assert isinstance(message, JSONRPCRequest)
        await self._reply(message, headers)
        return None

    async def _reply(self, request: JSONRPCRequest, headers: list[tuple[str, str]]) -> None:
        """Answer a server request met on the answer stream, with the session's own handler, as the SDK does."""
        reply: JSONRPCResponse | JSONRPCError
        try:
            result = await self._session._on_request(_Context(request.id), request.method, request.params)
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
