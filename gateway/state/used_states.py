"""Used-state stores: a one-time id (a sealed `requestState`'s, an ended `Mcp-Session-Id`'s digest) claimed once,
in memory for one process or in Redis (`SET NX` with the id's own expiry) for replicas (`request_state.py`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio

from ..errors import StateUnavailable

__all__ = ["MemoryUsedStates", "RedisUsedStates", "UsedStates"]

_REDIS_USED = "agent-sdk:request-state:used:"


class UsedStates(Protocol):
    """Claims a state's id once; a second claim of the same id fails (a replay)."""

    async def claim(self, state_id: str, expires_at: float) -> bool:
        """Claim `state_id` until `expires_at`: False when it was claimed already. Raises `StateUnavailable`
        when a shared store cannot be reached."""
        ...

    async def used(self, state_id: str) -> bool:
        """Whether `state_id` was claimed and has not expired, without claiming it. Raises `StateUnavailable`
        as `claim`."""
        ...


class MemoryUsedStates:
    """`UsedStates` for one process: ids kept until their state would have expired anyway."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._used: dict[str, float] = {}
        self._clock = clock

    async def claim(self, state_id: str, expires_at: float) -> bool:
        now = self._clock()
        if len(self._used) > 1024:
            self._used = {k: v for k, v in self._used.items() if v > now}
        if state_id in self._used:
            return False
        self._used[state_id] = expires_at
        return True

    async def used(self, state_id: str) -> bool:
        expires_at = self._used.get(state_id)
        return expires_at is not None and expires_at > self._clock()


class RedisUsedStates:
    """`UsedStates` shared by every replica: `SET NX` with the state's own expiry.

    Every Redis failure becomes `StateUnavailable` (503 `state_unavailable`, a sentence that says retry), as in
    the session store: `used` runs on every POST that carries an `Mcp-Session-Id`, so a Redis restart must not
    answer those 500. `used` is a read, asked again a few times (`_USED_TRIES`) before it gives up; `claim`
    is not (a `SET NX` that landed but whose reply was lost would then read as a replay)."""

    def __init__(self, redis: Any, clock: Callable[[], float] = time.time) -> None:
        self._redis = redis
        self._clock = clock

    async def claim(self, state_id: str, expires_at: float) -> bool:
        """Raises `StateUnavailable` when Redis does not answer."""
        import redis.exceptions

        ttl_ms = max(1, int((expires_at - self._clock()) * 1000))
        try:
            return bool(await self._redis.set(_REDIS_USED + state_id, "1", nx=True, px=ttl_ms))
        except (redis.exceptions.RedisError, OSError) as exc:
            raise _unavailable(exc) from None

    async def used(self, state_id: str) -> bool:
        """Raises `StateUnavailable` when Redis has not answered after `_USED_TRIES` tries."""
        import redis.exceptions

        for attempt in range(_USED_TRIES):
            try:
                return bool(await self._redis.exists(_REDIS_USED + state_id))
            except (redis.exceptions.RedisError, OSError) as exc:
                if attempt + 1 == _USED_TRIES:
                    raise _unavailable(exc) from None
                await anyio.sleep(_USED_PAUSE_S)
        raise AssertionError("unreachable")


_USED_TRIES = 4
_USED_PAUSE_S = 0.25
"""A Redis restart's refused connections: about a second of patience before the request is answered 503."""


def _unavailable(exc: BaseException) -> StateUnavailable:
    return StateUnavailable(f"the shared state store is unavailable ({type(exc).__name__}); retry shortly")
