"""`IdentityBook`: one `auth` connection's identities, least recently used first, with their bounds.

The book admits an identity (the digest of a session's headers, `connections/client/_identity.py`) when a call needs
it, keeps at most `max_identities` (closing the least recently used idle one to make room; one in
use is never closed under its caller, and the book trims back to the cap as calls finish), closes
one unused for `identity_idle_timeout` seconds, and remembers which session holds which identity:
a session whose headers changed (rotation), or that ended, releases its old one, which closes when
no other session holds it. What closing means for a client is the pool's (`retire`, called once
per identity, when it is closed and no call uses it). `cachetools`' LRU and TTL caches evict
without asking whether an entry is in use, so this is an `OrderedDict` (docs/architecture.md).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..client._identity import SessionHeaders

__all__ = ["Identity", "IdentityBook", "IdentityCounts"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Identity:
    """One identity of a connection: its digest, its listing cache key, its client (the pool's)."""

    digest: str
    key: str
    """The listing cache's key: connection name and digest (never a header)."""
    last_used: float
    client: Any = None
    """The pool's client for this identity alone, or None (none yet, or the shared one serves it)."""
    holders: set[str] = field(default_factory=set[str])
    """Ids of the sessions whose latest headers are this identity."""
    busy: int = 0
    gone: bool = False


class IdentityBook:
    """Connection `name`'s identities, bounded by `cap` and `idle` seconds; `retire(identity)` closes its client."""

    def __init__(self, name: str, cap: int, idle: float, retire: Callable[[Identity], None]) -> None:
        self.name = name
        self.cap = cap
        self.idle = idle
        self._retire = retire
        self.identities: OrderedDict[str, Identity] = OrderedDict()
        """By digest, least recently used first."""
        self._held: dict[str, str] = {}
        """Session id -> the digest of its latest headers."""
        self.opened = 0
        self.closed = 0

    def enter(self, headers: Mapping[str, str]) -> Identity:
        """The identity of `headers`, admitted (making room under the cap) and marked in use until `leave`."""
        now = time.monotonic()
        first = next(iter(self.identities.values()), None)
        if first is not None and first.last_used + self.idle <= now:
            self.expire(now)
        digest = headers.digest if isinstance(headers, SessionHeaders) else SessionHeaders(headers).digest
        entry = self.identities.get(digest)
        if entry is None:
            self._make_room(keep=1)
            entry = Identity(digest, f"{self.name}\x00{digest}", now)
            self.identities[digest] = entry
            self.opened += 1
            logger.debug("connection %r: identity %s admitted", self.name, digest)
        else:
            self.identities.move_to_end(digest)
        entry.last_used = now
        entry.busy += 1
        session_id = headers.session_id if isinstance(headers, SessionHeaders) else None
        if session_id is not None and self._held.get(session_id) != digest:
            before = self._held.get(session_id)
            self._held[session_id] = digest
            entry.holders.add(session_id)
            old = self.identities.get(before) if before is not None else None
            if old is not None:
                old.holders.discard(session_id)
                if not old.holders:
                    self.close(old, "its session's credentials changed")
        return entry

    def leave(self, entry: Identity) -> None:
        entry.busy -= 1
        entry.last_used = time.monotonic()
        if entry.busy:
            return
        if entry.gone:
            self._retire(entry)
        elif len(self.identities) > self.cap:
            self._make_room(keep=0)  # back under the cap once the calls that pushed it over are done

    def release(self, session_id: str) -> None:
        """Session `session_id` ended: its identity closes unless another session holds it."""
        digest = self._held.pop(session_id, None)
        entry = self.identities.get(digest) if digest is not None else None
        if entry is not None:
            entry.holders.discard(session_id)
            if not entry.holders:
                self.close(entry, "its session ended")

    def expire(self, now: float) -> None:
        """Close the identities unused for `idle` seconds (none with a call in flight)."""
        for entry in list(self.identities.values()):
            if entry.last_used + self.idle > now:
                break  # least recently used first: the rest are fresher
            if not entry.busy:
                self.close(entry, f"idle for {self.idle:g}s")

    def close(self, entry: Identity, why: str) -> None:
        """Forget `entry`; its client is retired now, or when its last call ends. Idempotent."""
        if entry.gone:
            return
        entry.gone = True
        if self.identities.get(entry.digest) is entry:
            del self.identities[entry.digest]
        for session_id in entry.holders:
            if self._held.get(session_id) == entry.digest:
                del self._held[session_id]
        entry.holders.clear()
        self.closed += 1
        logger.debug("connection %r: identity %s closed: %s", self.name, entry.digest, why)
        if not entry.busy:
            self._retire(entry)

    def _make_room(self, keep: int) -> None:
        """Close least recently used idle identities until `keep` more fit under the cap."""
        for entry in list(self.identities.values()):
            if len(self.identities) + keep <= self.cap:
                return
            if not entry.busy:
                self.close(entry, f"least recently used (max_identities={self.cap})")


@dataclass(frozen=True, slots=True)
class IdentityCounts:
    """One connection's identity clients (for `/v1/info`-style views, metrics and tests)."""

    live: int
    """Identities kept now."""
    opened: int
    """Identities admitted so far (a returning identity after its client closed counts again)."""
    closed: int
    """Identities closed so far: evicted (cap), expired (idle), rotated away or released by their session."""
    shared: bool
    """One client serves every identity (a 2026-07-28 upstream on the fast wire)."""
