"""Keep-alive HTTP/1.1 connections to one origin, on asyncio and httptools: the fast `tools/call` wire.

The fast leg (`_fast_calls.py`) makes one kind of request, a POST with a small JSON body whose
answer is JSON or a short SSE stream; `httpx2` spends about 1 ms of CPU on each (pool scans,
response and stream objects, a pure-Python parser), this module about a tenth of that: a list of
idle connections, one `httptools` parser (uvicorn's C parser) per connection, body chunks handed
to the reader as they arrive (`docs/performance.md`). Failures are raised as the `httpx2`
exceptions the SDK path would surface, so `_translate.translate` maps both paths alike. Not here,
on purpose: proxies, redirects, compression, HTTP/2, request streaming (the caller only uses this
leg where none of them applies). Framing edge cases: `tests/connections/test_http1.py`.
"""

from __future__ import annotations

import asyncio
import select
import ssl
import time
from collections import deque
from collections.abc import Iterable
from typing import cast
from urllib.parse import urlsplit

import anyio
import httptools  # pyright: ignore[reportMissingTypeStubs]
import httpx2

__all__ = ["MAX_HEAD_BYTES", "BodyTooLarge", "Http1Origin", "Http1Response", "valid_header_value"]

_KEEPALIVE_DEFAULT = 5.0
"""How long an idle connection is reused when the server does not say (`httpx2`'s keep-alive expiry)."""
_KEEPALIVE_MARGIN = 1.0
"""Stop reusing an idle connection this long before the server's announced timeout closes it."""
_MAX_IDLE = 32
_MAX_CONNECTIONS = 100
"""As `httpx2`'s default limits: more concurrent requests wait for a connection."""
_HIGH_WATER = 256 * 1024
"""Unread body bytes above this pause reading from the socket until the reader catches up."""
MAX_HEAD_BYTES = 100 * 1024
"""A response's status line and headers may take this much, as `httpcore2` allows (h11's buffer cap)."""
_NO_BODY = frozenset({204, 304})
"""Statuses whose response never has a body (RFC 9110 §6.4.1), whatever its headers say."""


def valid_header_value(value: str) -> bool:
    """Whether `value` can go on the wire as is (no CR, LF or NUL: they would split or end the header)."""
    return not any(c in value for c in "\r\n\0")


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; one response at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)  # pyright: ignore[reportUnknownMemberType]
        self.closed = False
        self.busy = False
        """A request is out and its response not complete; bytes arriving otherwise spoil the connection."""
        self.idle_since = 0.0
        self.keep_alive_for = _KEEPALIVE_DEFAULT - _KEEPALIVE_MARGIN
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
            self.parser.feed_data(data)  # pyright: ignore[reportUnknownMemberType]
        except httptools.HttpParserError as exc:  # pyright: ignore[reportUnknownMemberType]
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
        self.status = int(self.parser.get_status_code())  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
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
        self.reusable = bool(self.parser.should_keep_alive()) and not self.until_eof  # pyright: ignore[reportUnknownMemberType]
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


def _readable(conn: _Connection) -> bool:
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


class BodyTooLarge(Exception):
    """A response body over the reader's limit; the rest is left unread (the connection is not reused)."""


class Http1Response:
    """The status and headers of one answer; its body is read with `read()` or `next_chunk()`."""

    def __init__(self, origin: Http1Origin, connection: _Connection) -> None:
        self._origin = origin
        self._connection = connection
        self.status = connection.status
        self._raw_headers = connection.headers
        self._done = False

    def header_items(self) -> list[tuple[str, str]]:
        """Every header as (lower-case name, value), in the order received."""
        return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in self._raw_headers]

    def header(self, name: str) -> str:
        """The value of header `name` (lower-case), `""` when absent; repeated headers are joined with `, `."""
        key = name.encode("latin-1")
        values = [value.decode("latin-1") for found, value in self._raw_headers if found == key]
        return ", ".join(values)

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body; `BodyTooLarge` as soon as it is over `limit` bytes (announced or received)."""
        if limit is not None and self.header("content-length").isdigit() and int(self.header("content-length")) > limit:
            raise BodyTooLarge
        parts: list[bytes] = []
        seen = 0
        while chunk := await self.next_chunk():
            seen += len(chunk)
            if limit is not None and seen > limit:
                raise BodyTooLarge
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def next_chunk(self) -> bytes:
        """The body bytes that arrived since the last call, waiting for some; `b""` once the response ended.

        (A coroutine per chunk rather than an async generator: the loop registers and finalizes every
        async generator, which costs the one-chunk answer of a call more than reading it.)
        """
        conn = self._connection
        while not conn.body:
            if conn.complete:
                return b""
            await conn.wait()
        return conn.take_body()

    async def finish(self, *, seconds: float, max_bytes: int) -> None:
        """Read what is left of the body (bounded), so the connection can be reused; then release it."""
        conn = self._connection
        if conn.complete and not conn.body:  # the usual case: the answer ended with its last event
            self.release()
            return
        drained = 0
        try:
            with anyio.move_on_after(seconds):
                while not conn.complete and drained <= max_bytes:
                    if conn.body:
                        drained += len(conn.take_body())
                    else:
                        await conn.wait()
        except httpx2.TransportError:
            pass
        finally:
            self.release()  # also when the caller is cancelled mid-drain: the slot and the socket are freed

    def release(self) -> None:
        """Hand the connection back when the response ended cleanly; close it otherwise. Idempotent."""
        if self._done:
            return
        self._done = True
        self._origin.give_back(self._connection)


class Http1Origin:
    """Keep-alive connections to the origin of `url`; every request targets `url`'s path and query."""

    def __init__(self, url: str, *, ssl_context: ssl.SSLContext | None, connect_timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {parts.scheme}://{parts.hostname}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        default_port = 443 if parts.scheme == "https" else 80
        self.port = parts.port or default_port
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host if self.port == default_port else f"{host}:{self.port}"
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.url = url
        self._ssl = ssl_context if parts.scheme == "https" else None
        self._connect_timeout = connect_timeout
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(_MAX_CONNECTIONS)  # anyio's yields to the loop on every acquire
        self._closed = False

    async def request(self, method: str, headers: Iterable[tuple[str, str]], body: bytes = b"") -> Http1Response:
        """Send one request and wait for its status and headers; the caller must `release()` the response.

        `headers` must already be valid (`valid_header_value`); Host and Content-Length are added here.
        """
        if self._closed:
            raise httpx2.ConnectError("the connection pool is closed")
        lines = [f"{method} {self.target} HTTP/1.1\r\nhost: {self.host_header}\r\n"]
        lines.extend(f"{name}: {value}\r\n" for name, value in headers)
        if body or method == "POST":
            lines.append(f"content-length: {len(body)}\r\n")
        lines.append("\r\n")
        data = "".join(lines).encode("latin-1") + body
        await self._slots.acquire()
        try:
            conn = self._take_idle() or await self._connect()
        except BaseException:
            self._slots.release()
            raise
        try:
            conn.send(data)
            while not conn.head_done:
                await conn.wait()
        except BaseException:
            conn.close()
            self._slots.release()
            raise
        return Http1Response(self, conn)

    def give_back(self, conn: _Connection) -> None:
        """A response is done with `conn`: keep it for the next request if it ended cleanly, else close it."""
        self._slots.release()
        clean = conn.complete and conn.reusable and not conn.closed and not conn.body
        if not clean or self._closed or len(self._idle) >= _MAX_IDLE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        await asyncio.sleep(0)  # let the transports finish closing

    def _take_idle(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have timed out
            if not conn.closed and now - conn.idle_since < conn.keep_alive_for and not _readable(conn):
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self._connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"connecting to {self.host_header} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"cannot connect to {self.host_header}: {exc.strerror or exc}") from None
        return conn
