"""Keep upstream HTTP connections reusable when the MCP SDK stops reading a response early.

The SDK's Streamable HTTP client closes a POST's SSE response as soon as the JSON-RPC answer
event arrives. Closing a streaming response before its end makes httpcore drop the TCP
connection, so every call to an upstream that answers with SSE paid a new connection. Servers
end that stream right after the answer, so draining what is left (bounded in bytes and time)
lets the connection go back to the pool instead.

The same wrapper refuses a JSON answer over the connection's `max_result_bytes` as it arrives
(`ResultTooLarge` by way of `translate`), so an oversized body is never held whole.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2

from .._exceptions import ResultTooLarge

__all__ = ["DRAIN_BYTES", "DRAIN_SECONDS", "DrainingTransport"]

DRAIN_SECONDS = 0.05
DRAIN_BYTES = 64 * 1024


class AnswerTooLarge(httpx2.StreamError):
    """A JSON body over `max_result_bytes`: the SDK reports a `StreamError` to the request it answers."""


class EventsTooLarge(httpx2.SSEError):
    """A POST's event stream over `max_result_bytes`: the SDK reports an `SSEError` to the request it answers."""


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, announced: str, *, events: bool) -> None:
        self._inner = inner
        self._limit = limit
        self._announced = int(announced) if announced.isdigit() else 0
        self._error = EventsTooLarge if events else AnswerTooLarge

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._announced > self._limit:
            raise self._error(ResultTooLarge.transport_note(self._limit))  # refused before a byte of the body is read
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise self._error(ResultTooLarge.transport_note(self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _DrainOnClose(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._closed = False
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._ended:
            # Read to its end already: the connection is reusable as is, and iterating again would
            # wait for bytes that never come.
            await self._inner.aclose()
            return
        try:
            # A held-open stream (the GET listener) is cut after the short bound, as before.
            with anyio.move_on_after(DRAIN_SECONDS):
                drained = 0
                async for chunk in self._inner:
                    drained += len(chunk)
                    if drained > DRAIN_BYTES:
                        break
        except (httpx2.StreamError, httpx2.TransportError, anyio.ClosedResourceError, RuntimeError):
            pass  # nothing left to save: close as usual
        finally:
            await self._inner.aclose()


class DrainingTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport so that closing a response first drains its unread remainder."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, *, max_body: int | None = None) -> None:
        self._inner = inner
        self._max_body = max_body

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        # Only a POST's SSE answer ends by itself right after the answer; a JSON body is read whole by
        # the SDK, and the GET listener stays open: both are closed as they are.
        is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
        if request.method != "POST" or not isinstance(stream, httpx2.AsyncByteStream):
            return response
        # A POST's answer (JSON, or an event stream that ends after the answer) counts toward the cap;
        # the GET listener's stream, open for the session's life, does not.
        if self._max_body is not None:
            stream = _Capped(stream, self._max_body, response.headers.get("content-length", ""), events=is_sse)
            response.stream = stream
        if is_sse:
            response.stream = _DrainOnClose(stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
