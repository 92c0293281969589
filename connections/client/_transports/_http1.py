"""Keep-alive HTTP/1.1 connections to one origin, on asyncio and httptools: the fast `tools/call` wire.

The fast leg (`connections/client/_fast_calls.py`) makes one kind of request, a POST with a small JSON body whose
answer is JSON or a short SSE stream; `httpx2` spends about 1 ms of CPU on each (pool scans,
response and stream objects, a pure-Python parser), this module about a tenth of that: a list of
idle connections, one `httptools` parser (uvicorn's C parser) per connection, body chunks handed
to the reader as they arrive (`docs/performance.md`). Failures are raised as the `httpx2`
exceptions the SDK path would surface, so `_translate.translate` maps both paths alike. Not here,
on purpose: proxies, redirects, compression, HTTP/2, request streaming (the caller only uses this
leg where none of them applies). Framing edge cases: `tests/connections/client/test_http1.py`.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2

from ..._exceptions import ConnectionsError
from ._http1_connection import MAX_HEAD_BYTES, Connection, readable
from ._json_chunks import JsonChunks

__all__ = ["MAX_HEAD_BYTES", "BodyTooLarge", "Http1Origin", "Http1Response", "shared_ssl_context", "valid_header_value"]

_MAX_IDLE = 32
_MAX_CONNECTIONS = 100
"""As `httpx2`'s default limits: more concurrent requests wait for a connection."""


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """One verifying TLS context for every client, on both wires: building one loads the CA bundle (~90 ms),
    and every identity of a per-session `auth` connection opens its own client. Contexts are safe to share."""
    return httpx2.create_ssl_context()


def valid_header_value(value: str) -> bool:
    """Whether `value` can go on the wire as is (no CR, LF or NUL: they would split or end the header)."""
    return not any(c in value for c in "\r\n\0")


class BodyTooLarge(ConnectionsError):
    """A response body over the reader's limit; the rest is left unread (the connection is not reused)."""


class Http1Response:
    """The status and headers of one answer; its body is read with `read()` or `next_chunk()`."""

    def __init__(self, origin: Http1Origin, connection: Connection) -> None:
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
        self._check_announced(limit)
        parts: list[bytes] = []
        seen = 0
        while chunk := await self.next_chunk():
            seen += len(chunk)
            if limit is not None and seen > limit:
                raise BodyTooLarge
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def read_json(self, limit: int | None = None) -> tuple[Any, bytes | None]:
        """The body parsed as one JSON value as its chunks arrive (`JsonChunks`: a large body is never
        held whole), with the body's bytes when it was short enough to be held whole anyway (under 1 MiB);
        `BodyTooLarge` as `read`; `ValueError` for a body that is not one JSON value."""
        self._check_announced(limit)
        parts = JsonChunks()
        while chunk := await self.next_chunk():
            if limit is not None and parts.size + len(chunk) > limit:
                raise BodyTooLarge
            parts.feed(chunk)
        return parts.finish_with_text()

    def _check_announced(self, limit: int | None) -> None:
        if limit is not None and self.header("content-length").isdigit() and int(self.header("content-length")) > limit:
            raise BodyTooLarge

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
        self._idle: list[Connection] = []
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

    def give_back(self, conn: Connection) -> None:
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

    def _take_idle(self) -> Connection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have timed out
            if not conn.closed and now - conn.idle_since < conn.keep_alive_for and not readable(conn):
                return conn
            conn.close()
        return None

    async def _connect(self) -> Connection:
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self._connect_timeout):
                _, conn = await loop.create_connection(
                    Connection, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"connecting to {self.host_header} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"cannot connect to {self.host_header}: {exc.strerror or exc}") from None
        return conn
