"""uvicorn's httptools protocol with the limits uvicorn leaves out, set per connection.

uvicorn bounds the time *between* requests (`timeout_keep_alive`, armed only after a response)
and offers `limit_concurrency` (a 503 per request once that many connections are open, while
every connection stays open). It has no bound on a fresh connection that never sends a byte, on
how long a request head or body may take to arrive (slowloris, slow body), or on the size of a
request head under httptools (llhttp buffers a header value whole). `HttpLimits` fills those gaps
at the connection, before any ASGI code runs:

- **idle**: a new connection must start a request within `idle_timeout` (as between requests);
- **head**: once a request's first byte arrives, its whole head must within `header_timeout`;
- **body**: once the head is in, the whole body must arrive within `body_timeout`;

(each checked by one sweep per server every quarter of the shortest timeout, at most every 1 s,
so a connection is closed within its timeout plus that tick);
- **head size**: more than `max_header_bytes` of request head is **431** and the connection closes;
- **connections**: past `max_connections` open at once, a new one gets **503** with `Retry-After: 1`
  (RFC 9110 §10.2.3: when to try again) and is closed.

It also notes the uid owning a loopback peer's socket (`peer_credentials`) once per connection,
in `scope["extensions"]["agent_sdk.peer_uid"]`, for loopback-strict.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ._asgi import is_loopback_address
from .tcp_peers import peer_uid

__all__ = ["PEER_UID", "HttpLimits", "limited_protocol"]

PEER_UID = "agent_sdk.peer_uid"
"""The scope extension carrying the loopback peer's uid (None when it could not be found)."""

_REFUSED_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 37\r\nconnection: close\r\n\r\nthe request head is over the size cap"
)
_REFUSED_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 35\r\nretry-after: 1\r\nconnection: close\r\n\r\ntoo many connections; retry shortly"
)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """Per-connection limits (seconds and bytes); `serve` flags, documented in docs/http-api.md."""

    idle_timeout: float = 5.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_connections: int = 1000
    peer_uids: bool = True


class _LimitedProtocol(HttpToolsProtocol):
    limits: ClassVar[HttpLimits] = HttpLimits()
    sweeping: ClassVar[bool] = False
    """Whether this server's sweep is scheduled (one per `limited_protocol` class, i.e. per server)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._due: float | None = None
        self._in_head = True
        self._head_bytes = 0
        self._peer_uid: int | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            transport.write(_REFUSED_503)
            transport.close()
            return
        if self.limits.peer_uids and self.client is not None and is_loopback_address(self.client[0]):
            self._peer_uid = peer_uid(self.client, self.server)  # type: ignore[arg-type]
        # uvicorn's keep-alive timer runs only after a response: a fresh connection gets the same bound.
        self._due = self.loop.time() + self.limits.idle_timeout
        cls = type(self)
        if not cls.sweeping:
            cls.sweeping = True
            self.loop.call_later(_tick(self.limits), _sweep, self.loop, self.connections, cls)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.limits.max_header_bytes and not self.transport.is_closing():
            self.transport.write(_REFUSED_431)
            self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.limits.peer_uids:
            self.scope["extensions"] = {PEER_UID: self._peer_uid}  # type: ignore[typeddict-unknown-key]
        # A deadline, not a timer: arming and cancelling an event-loop timer per phase of every
        # request cost more than the rest of this class; `_sweep` checks the deadlines instead.
        self._due = self.loop.time() + self.limits.header_timeout

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._due = self.loop.time() + self.limits.body_timeout
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._due = None
        self._in_head, self._head_bytes = True, 0
        super().on_message_complete()

    def expire_by(self, now: float) -> None:
        """Close the connection if its fresh-connection, head or body deadline has passed (the app,
        if it is reading the body, sees `http.disconnect`)."""
        if self._due is not None and now >= self._due and not self.transport.is_closing():
            self._due = None
            self.transport.close()


def _tick(limits: HttpLimits) -> float:
    """How often deadlines are checked: a quarter of the shortest timeout, at most 1 s."""
    return min(limits.idle_timeout, limits.header_timeout, limits.body_timeout, 4.0) / 4


def _sweep(loop: asyncio.AbstractEventLoop, connections: set[Any], cls: type[_LimitedProtocol]) -> None:
    now = loop.time()
    for connection in list(connections):
        if isinstance(connection, _LimitedProtocol):
            connection.expire_by(now)
    if connections:
        loop.call_later(_tick(cls.limits), _sweep, loop, connections, cls)
    else:
        cls.sweeping = False  # the next connection starts it again


def limited_protocol(limits: HttpLimits) -> type[asyncio.Protocol]:
    """uvicorn's `http=` protocol class with `limits`."""
    return type("LimitedHttpToolsProtocol", (_LimitedProtocol,), {"limits": limits})
