"""Started console logins waiting for their redirect (docs/console.md, "Replicas").

A login started with `POST /v1/connections/{name}/login` (`oauth.LoginStart`: the PKCE verifier, the
client registration, the server's metadata) is kept until the authorization server sends the browser
back to `/v1/oauth/callback`, for `LOGIN_TTL` seconds, found by its `state` and taken once: a replayed
redirect finds nothing. Two stores, one protocol (`state.serving_pending_logins` picks):

- `MemoryPendingLogins`: one process (no `--state-url`).
- `RedisPendingLogins`: every replica of a deployment. One Redis string per login under the SHA-256 of
  its `state` (never the state itself), holding `LoginStart.to_json` sealed with the deployment's
  AES-GCM key (`RequestStates.seal_login`: no verifier or client secret in Redis in the clear), with
  the `LOGIN_TTL` expiry; taken with `GETDEL`, so two replicas given the same redirect cannot both
  finish it.

Both hold at most `MAX_PENDING` logins, dropping the oldest past it, so a flood of started logins
cannot grow them; in Redis that bound is per deployment (a sorted set of the digests by expiry,
trimmed in the same Lua script that adds one).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, Protocol

from oauth import LoginStart, OAuthError
from oauth._shared import Secret

from ..errors import StateUnavailable
from ._redis import safe_url
from .request_state import RequestStates

__all__ = ["LOGIN_TTL", "MAX_PENDING", "MemoryPendingLogins", "PendingLogins", "RedisPendingLogins"]

LOGIN_TTL = 600.0
"""Seconds a started browser login waits for its redirect."""
MAX_PENDING = 64
"""Started logins kept at once (per process, or per deployment with `--state-url`); the oldest go first."""

_KEY = "agent-sdk:console:login:"
_INDEX = "agent-sdk:console:logins"

# KEYS: the index, the new login's key. ARGV: its digest, sealed value, expiry (ms since the epoch),
# TTL (ms), cap, key prefix. Drops expired and then the oldest past the cap, atomically with the add.
_REMEMBER = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3] - ARGV[4])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[5]) + 1
if over > 0 then
  for i, item in ipairs(redis.call('ZPOPMIN', KEYS[1], over)) do
    if i % 2 == 1 then redis.call('DEL', ARGV[6] .. item) end
  end
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[4])
return 1
"""


class PendingLogins(Protocol):
    async def remember(self, start: LoginStart) -> None:
        """Keep `start` until its redirect comes (raises `StateUnavailable` when the store is away)."""
        ...

    async def take(self, state: str) -> LoginStart | None:
        """The login `state` belongs to, once; None when none (expired, used, or never started here)."""
        ...


class MemoryPendingLogins:
    """`PendingLogins` in this process's memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: dict[str, tuple[LoginStart, float]] = {}
        self._clock = clock

    async def remember(self, start: LoginStart) -> None:
        self._expire()
        while len(self._pending) >= MAX_PENDING:
            self._pending.pop(next(iter(self._pending)))
        self._pending[start.state.reveal()] = (start, self._clock())

    async def take(self, state: str) -> LoginStart | None:
        self._expire()
        found = self._pending.pop(state, None)
        return None if found is None else found[0]

    def _expire(self) -> None:
        now = self._clock()
        for state in [s for s, (_, started) in self._pending.items() if now - started > LOGIN_TTL]:
            del self._pending[state]


class RedisPendingLogins:
    """`PendingLogins` every replica sees (module docstring)."""

    def __init__(self, redis: Any, sealer: RequestStates, *, url: str = "", ttl_s: float = LOGIN_TTL) -> None:
        self._redis = redis
        self._sealer = sealer
        self._ttl_ms = int(ttl_s * 1000)
        self.name = safe_url(url) if url else "Redis"

    def __repr__(self) -> str:
        return f"RedisPendingLogins({self.name})"

    async def remember(self, start: LoginStart) -> None:
        digest = _digest(start.state.reveal())
        sealed = self._sealer.seal_login(start.to_json())
        expires = int(time.time() * 1000) + self._ttl_ms
        args = (digest, sealed, expires, self._ttl_ms, MAX_PENDING, _KEY)
        await self._call(lambda: self._redis.eval(_REMEMBER, 2, _INDEX, _KEY + digest, *args))

    async def take(self, state: str) -> LoginStart | None:
        if not state:
            return None
        digest = _digest(state)
        sealed = await self._call(lambda: self._redis.getdel(_KEY + digest))
        if sealed is None:
            return None
        await self._call(lambda: self._redis.zrem(_INDEX, digest))
        record = self._sealer.open_login(sealed)
        if record is None:
            return None  # not sealed with this deployment's key: treated like no login at all
        try:
            start = LoginStart.from_json(record, f"the Redis key {_KEY}<digest> at {self.name}")
        except OAuthError:
            return None
        # The digest names the value's slot; the sealed state must be the one the redirect carried.
        return start if start.state == Secret(state) else None

    async def _call(self, op: Callable[[], Any]) -> Any:
        import redis.exceptions

        try:
            return await op()
        except redis.exceptions.RedisError as exc:
            raise StateUnavailable(
                f"the shared state store (Redis at {self.name}) is unavailable ({type(exc).__name__}); "
                "retry the login shortly"
            ) from None


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()
