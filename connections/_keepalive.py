"""Keep upstream HTTP connections reusable when the MCP SDK stops reading a response early.

The SDK's Streamable HTTP client closes a POST's SSE response as soon as the JSON-RPC answer
event arrives. Closing a streaming response before its end makes httpcore drop the TCP
connection, so every call to an upstream that answers with SSE paid a new connection. Servers
end that stream right after the answer, so draining what is left (bounded in bytes and time)
lets the connection go back to the pool instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2

__all__ = ["DRAIN_BYTES", "DRAIN_SECONDS", "DrainingTransport"]

DRAIN_SECONDS = 0.05
DRAIN_BYTES = 64 * 1024


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

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        # Only a POST's SSE answer ends by itself right after the answer; a JSON body is read whole by
        # the SDK, and the GET listener stays open: both are closed as they are.
        is_sse = response.headers.get("content-type", "").startswith("text/event-stream")
        if request.method == "POST" and is_sse and isinstance(stream, httpx2.AsyncByteStream):
            response.stream = _DrainOnClose(stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
