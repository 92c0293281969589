"""`SessionStore`: where sessions live, behind one protocol with two implementations side by side.

- `FileSessionStore` (`_store.py`): files under `--state-root`, one process (the embedded default).
- `RedisSessionStore` (`_redis.py`): Redis (`--state-url`), shared by every replica.

The service (`_service.py`) holds no session state of its own beyond the turns running in this
process: every read goes to the store, so any replica answers for any session. The shapes keep
cost proportional to what is asked: a listing is one page of a per-principal index (newest first,
cursor + limit), an event log is read from an index on demand, and a turn holds a lease the store
checks on every write (a replica that lost its lease can no longer write to the session).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, Protocol

from ._records import SessionRecord

__all__ = ["SessionStore"]


class SessionStore(Protocol):
    """Every method raises `StateUnavailable` when the backing store cannot be reached."""

    @property
    def shared(self) -> bool:
        """True when other processes may run turns on the same sessions (leases can lapse)."""
        ...

    async def open(self) -> None:
        """Prepare the store (folders, connections). Raises `OSError` for an unusable state root."""
        ...

    async def aclose(self) -> None: ...

    async def create(self, record: SessionRecord) -> None:
        """Store a new session and index it under its owner and its continuation token."""
        ...

    async def load(self, session_id: str) -> SessionRecord | None:
        """The record with its current token, running turn, last outcome and event count; None if unknown."""
        ...

    async def find_token(self, token: str) -> tuple[str, bool] | None:
        """(session id, True) for a current token, (session id, False) for a rotated-away one, else None."""
        ...

    async def rotate(self, session_id: str, expected: str | None, new: str) -> bool:
        """Replace the continuation token with `new` if it is still `expected` (any token when None)."""
        ...

    async def page(
        self, principal: str, before: tuple[int, str] | None, limit: int
    ) -> tuple[list[SessionRecord], tuple[int, str] | None]:
        """Up to `limit` of `principal`'s sessions older than the cursor `before`, newest first, and the next cursor."""
        ...

    async def count(self) -> int | None:
        """How many sessions the store holds; None when it cannot tell (a damaged counter)."""
        ...

    async def owners(self, limit: int) -> dict[str, int]:
        """Session counts by owning principal, for at most `limit` principals (the console's operators)."""
        ...

    async def append(self, session_id: str, events: Sequence[dict[str, Any]], holder: str | None = None) -> bool:
        """Append events (indexes are assigned here, in order). With `holder`, only while it holds the turn's
        lease: False (nothing written) once the lease was lost."""
        ...

    async def read(self, session_id: str, start: int, *, block_s: float = 0.0, limit: int = 0) -> list[dict[str, Any]]:
        """Events from index `start` (at most `limit`, 0 = all); when there are none yet, wait up to `block_s`."""
        ...

    async def begin_turn(
        self, session_id: str, turn_id: str, holder: str, lease_s: float, events: Sequence[dict[str, Any]]
    ) -> bool:
        """Take the session's turn lease for `holder` and append `events`, atomically; False when a turn runs."""
        ...

    async def renew(self, session_id: str, holder: str, lease_s: float) -> bool:
        """Extend the lease; False when `holder` no longer holds it."""
        ...

    async def end_turn(
        self, session_id: str, holder: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        """Append the closing events, record `last_turn` and release the lease, atomically, if `holder` holds it."""
        ...

    async def lapsed(self) -> list[tuple[str, str]]:
        """(session id, turn id) of every turn whose lease has lapsed."""
        ...

    async def reap(
        self, session_id: str, turn_id: str, last_turn: dict[str, Any], events: Sequence[dict[str, Any]]
    ) -> bool:
        """Close `turn_id` with `events` if its lease has lapsed (once: False when it was already closed)."""
        ...

    async def request_cancel(self, session_id: str, turn_id: str) -> None:
        """Ask the replica running `turn_id` to cancel it (pub/sub); a no-op for a one-process store."""
        ...

    def cancellations(self) -> AsyncIterator[tuple[str, str]]:
        """(session id, turn id) cancel requests from other replicas, until cancelled."""
        ...
