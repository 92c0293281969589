"""Caps per principal: what one caller may hold at once on this gateway process.

Each cap counts per principal (the id the auth chain admitted), so a caller at its cap is refused with
a sentence and no other caller ever is (docs/http-api.md, "Caps per principal"):

- streams: 2026-07-28 `subscriptions/listen` streams and handshake-era sessions with a GET stream or
  subscriptions, one budget (`mcp/subscriptions.py`, `mcp/peers/streams.py`): `stream_cap(--max-connections)`,
  that is `MAX_STREAMS`, and at most a quarter of `--max-connections`;
- resource URIs per stream (a listen filter, a session's subscriptions): `MAX_URIS`;
- calls held for a 2026-07-28 peer's retry (`gateway/mcp/peers/held.py`): `MAX_HELD`;
- questions waiting for a handshake-era peer's answer (`gateway/mcp/peers/asks.py`): `MAX_QUESTIONS`.

A stream holds an HTTP connection for as long as it is open, so its cap is also a share of
`--max-connections`: one principal's streams leave at least three quarters of the connections to the
others. Refusals are JSON-RPC errors (`AtCap`: INVALID_REQUEST, the code the handshake-era caps have
always answered) or, on the GET stream, HTTP 429.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Generator
from contextlib import contextmanager

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from ...errors import GatewayError

__all__ = ["MAX_HELD", "MAX_QUESTIONS", "MAX_STREAMS", "MAX_URIS", "AtCap", "PerPrincipal", "stream_cap"]

MAX_STREAMS = 32
"""Streams a principal may hold open at once (with a large enough `--max-connections`)."""
MAX_URIS = 128
"""Resource URIs one stream (or one handshake-era session) may follow."""
MAX_HELD = 256
"""Calls held at once for one principal's retries (`gateway/mcp/peers/held.py`): every call of a 2026-07-28 peer that
declares elicitation or sampling runs held, so this also bounds how many such calls it runs at once."""
MAX_QUESTIONS = 256
"""Questions waiting at once for one principal's answers (`gateway/mcp/peers/asks.py`)."""


def stream_cap(max_connections: int) -> int:
    """Streams per principal for a server that keeps at most `max_connections` open: `MAX_STREAMS`, and
    never more than a quarter of them (at least one)."""
    return max(1, min(MAX_STREAMS, max_connections // 4))


class AtCap(MCPError, GatewayError):
    """One principal at one of its caps. A JSON-RPC error (INVALID_REQUEST); `status` for an HTTP answer."""

    status = 429

    def __init__(self, message: str) -> None:
        super().__init__(mt.INVALID_REQUEST, message)


class PerPrincipal:
    """How many of one kind of thing each principal holds, against one cap.

    `refusal(limit)` is the sentence a principal at the cap gets (what it holds, and what to do)."""

    __slots__ = ("_counts", "_refusal", "limit")

    def __init__(self, limit: int, refusal: Callable[[int], str]) -> None:
        self.limit = limit
        self._refusal = refusal
        self._counts: Counter[str] = Counter()

    def take(self, principal: str) -> None:
        """Count one more for `principal`. Raises `AtCap` when it already holds `limit`."""
        if self._counts[principal] >= self.limit:
            raise AtCap(self._refusal(self.limit))
        self._counts[principal] += 1

    def release(self, principal: str) -> None:
        """Count one fewer for `principal` (each `take` is released once)."""
        left = self._counts[principal] - 1
        if left > 0:
            self._counts[principal] = left
        else:
            self._counts.pop(principal, None)

    @contextmanager
    def holding(self, principal: str) -> Generator[None]:
        """One taken for the block. Raises `AtCap` as `take` does."""
        self.take(principal)
        try:
            yield
        finally:
            self.release(principal)

    def count(self, principal: str) -> int:
        return self._counts[principal]
