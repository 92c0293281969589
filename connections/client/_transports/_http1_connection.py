"""One keep-alive HTTP/1.1 connection on an asyncio protocol with `httptools` (uvicorn's C parser):
the connection half of the fast wire (`client/_transports/_http1.py` holds the response and the origin's pool).
Framing edge cases: `tests/connections/client/test_http1.py`."""

from __future__ import annotations

import asyncio
import select
from collections import deque
from typing import cast

import httptools
import httpx2

__all__ = ["IDLE_REUSE_S", "MAX_HEAD_BYTES", "Connection", "readable"]

_KEEPALIVE_DEFAULT = 5.0
"""How long an idle connection is reused when the server does not say (`httpx2`'s keep-alive expiry)."""
_KEEPALIVE_MARGIN = 1.0
"""Stop reusing an idle connection this long before the server's announced timeout closes it."""
IDLE_REUSE_S = _KEEPALIVE_DEFAULT - _KEEPALIVE_MARGIN
"""How long an idle connection is reused when the server does not say: a second short of the usual 5 s
(uvicorn's, httpx2's), so a request never goes out on a connection the server is closing at that moment
(it would fail unanswered, and the SDK's Streamable HTTP transport ends its whole session on that)."""
_HIGH_WATER = 256 * 1024
"""Unread body bytes above this pause reading from the socket until the reader catches up."""
MAX_HEAD_BYTES = 100 * 1024
"""A response's status line and headers may take this much, as `httpcore2` allows (h11's buffer cap)."""
_NO_BODY = frozenset({204, 304})
"""Statuses whose response never has a body (RFC 9110 §6.4.1), whatever its headers say."""


class Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.busy = False
        """A request is out and its response not complete; bytes arriving otherwise spoil the connection."""
        self.idle_since = 0.0
        self.keep_alive_for = IDLE_REUSE_S
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.complete = False
        self.reusable = False
        self.error: Exception | None = None
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.seen_bytes = False
        self.head_bytes = 0
        self.until_eof = False
        self.stray = False
        """Bytes of a response nobody asked for followed this one: the connection is not reused."""
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if not self.busy:
            self.close()  # stray bytes on an idle connection: its next response could not be parsed cleanly
            return
        self.seen_bytes = True
        if not self.head_done:
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if not self.complete:  # garbage after a whole answer spoils only the connection, not the answer
                self._fail(httpx2.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            self.close()
            return
        if self.stray:
            self.close()  # the answer is whole; what followed it cannot be trusted on this connection
        elif not self.head_done and self.head_bytes > MAX_HEAD_BYTES:
            self._head_too_large()  # a head that never ends must not grow the parser's buffers forever

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.until_eof and self.head_done and not self.complete:
            self.complete = True  # a body without length or chunking ends with the connection
        elif not self.complete:
            if not self.seen_bytes:
                self._fail(httpx2.RemoteProtocolError("Server disconnected without sending a response."))
            else:
                self._fail(httpx2.ReadError("the connection closed in the middle of the response"))
        self._wake()

    # -- httptools callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            self.stray = True  # a second response in the same bytes: no request of ours asked for it

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.stray:
            return
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        if self.stray or self.error is not None:
            return
        if sum(len(name) + len(value) + 4 for name, value in self.headers) > MAX_HEAD_BYTES:
            self._head_too_large()
            return
        self.status = int(self.parser.get_status_code())
        names = {name for name, _ in self.headers}
        delimited = b"content-length" in names or b"transfer-encoding" in names
        self.until_eof = not delimited and self.status not in _NO_BODY
        self.head_done = self.status >= 200  # an interim (1xx) answer is followed by the real one
        self._wake()

    def on_body(self, body: bytes) -> None:
        if not body or self.stray:
            return  # an empty chunk would read as the end of the body
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self.stray:
            return
        if not self.head_done:
            self.headers = []  # the interim answer is done; its headers are not the response's
            return
        self.complete = True
        self.busy = False
        self.reusable = bool(self.parser.should_keep_alive()) and not self.until_eof
        for name, value in self.headers:
            if name == b"keep-alive":
                self.keep_alive_for = _announced_timeout(value, self.keep_alive_for)
        self._wake()

    # -- used by Http1Origin / Http1Response ---------------------------------------------------

    def send(self, data: bytes) -> None:
        self._reset()
        self.busy = True
        assert self.transport is not None
        self.transport.write(data)

    def take_body(self) -> bytes:
        data = b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def wait(self) -> None:
        """Until the parser reports progress (headers, body bytes, the end) or the connection fails."""
        if self.error is not None:
            raise self.error
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            self._waiter = None
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _head_too_large(self) -> None:
        self._fail(httpx2.RemoteProtocolError(f"the response's headers are over the {MAX_HEAD_BYTES}-byte limit"))
        self.close()

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


def _announced_timeout(value: bytes, current: float) -> float:
    """`Keep-Alive: timeout=5, max=100` → 4.0 (the margin off); `current` when absent or unreadable."""
    for part in value.split(b","):
        key, _, number = part.strip().partition(b"=")
        if key.strip().lower() == b"timeout":
            try:
                return max(0.0, float(number) - _KEEPALIVE_MARGIN)
            except ValueError:
                return current
    return current


def readable(conn: Connection) -> bool:
    """Whether an idle connection has something to read: the server closed it (EOF) or sent stray bytes.

    The event loop learns of a close only when it next runs; a caller that kept it busy (a restarted
    upstream, a blocking call) would otherwise write into a dead connection. One `select` per reuse,
    as httpcore checks before it reuses a connection.
    """
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
