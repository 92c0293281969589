"""`PeerCalls`: the `tools/call` requests peers have in flight on `/v1/mcp/tools`, and their log levels.

Both are kept per peer (`Peer`): the principal the auth chain admitted (every unauthenticated
loopback caller is the one `anonymous` principal) and, for a handshake-era peer, the
`Mcp-Session-Id` its `initialize` was answered with (`gateway/mcp/peers/sessions.py`). So two clients that share
a token (or every local process under loopback-strict) are two peers, though every `mcp` client
numbers its requests from the same start. A peer that sends no `Mcp-Session-Id` (a raw POST, a
2026-07-28 peer, which has no session) is its principal alone.

- in-flight calls by `(peer, request id)`, so a handshake-era peer's `notifications/cancelled`
  (a POST of its own, with its `Mcp-Session-Id`) cancels that peer's call and never another's with
  the same id;
- the level a handshake-era peer set with `logging/setLevel`, which applies to that peer's later
  calls on this gateway process (a replica behind a balancer keeps its own; 2026-07-28 peers send
  the level with each request instead).

A call is kept only while it is in flight (so the connection limits bound them); the levels of the
last `MAX_LEVELS` peers to set one are kept, the least recently set forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mcp_types import LoggingLevel

__all__ = ["MAX_LEVELS", "Peer", "PeerCalls"]

MAX_LEVELS = 10_000
"""Peers whose `logging/setLevel` is remembered; the least recently set is forgotten first."""

Peer = tuple[str, str | None]
"""Whose a call or a level is: the principal's id and the peer's `Mcp-Session-Id` (None without one)."""


class PeerCalls:
    """In-flight `tools/call` requests and `logging/setLevel` levels, per peer (module docstring)."""

    __slots__ = ("_calls", "_levels")

    def __init__(self) -> None:
        self._calls: dict[tuple[Peer, Any], Callable[[str], None]] = {}
        self._levels: OrderedDict[Peer, LoggingLevel] = OrderedDict()

    def started(self, peer: Peer, request_id: Any, cancel: Callable[[str], None]) -> tuple[Peer, Any]:
        """Register a call whose `cancel(reason)` stops it; returns the key to pass to `finished`."""
        key = (peer, request_id)
        self._calls[key] = cancel  # a peer reusing an id in flight: the newer call is the one it can cancel
        return key

    def finished(self, key: tuple[Peer, Any], cancel: Callable[[str], None]) -> None:
        if self._calls.get(key) is cancel:
            del self._calls[key]

    def cancel(self, peer: Peer, request_id: Any, reason: str) -> bool:
        """Cancel `peer`'s call `request_id` (a `notifications/cancelled`); False when none is in flight."""
        found = self._calls.get((peer, request_id))
        if found is None and isinstance(request_id, int | str):  # JSON-RPC ids compare as the SDK's do: "7" is 7
            other = str(request_id) if isinstance(request_id, int) else _as_int(request_id)
            found = self._calls.get((peer, other)) if other is not None else None
        if found is None:
            return False
        found(reason)
        return True

    def set_level(self, peer: Peer, level: LoggingLevel) -> None:
        self._levels[peer] = level
        self._levels.move_to_end(peer)
        while len(self._levels) > MAX_LEVELS:
            self._levels.popitem(last=False)

    def level(self, peer: Peer) -> LoggingLevel | None:
        """The level `peer` last set, or None (no `notifications/message` unless a request asks)."""
        return self._levels.get(peer)

    def in_flight(self) -> int:
        return len(self._calls)


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None
