"""`RedisTokenStore`: grants shared by several replicas through Redis (`AGENT_SDK_SECRETS_URL=redis://...`).

Keys (prefix `agent-sdk:` by default): `agent-sdk:mcp-oauth:<connection>:<resource URL>` holds (for a
principal's own grant `<connection>@<principal>`, `StoreKey.holder`)
`Grant.to_json()` as JSON; the set `agent-sdk:mcp-oauth:index` lists them; the refresh single-flight
lock is a Redis lock (`SET NX PX` with a token, released by compare-and-delete) at
`agent-sdk:mcp-oauth-lock:<connection>:<resource URL>`, with a TTL so a crashed replica cannot wedge it.
The TTL (120 s) is twice the longest a refresh may take under it (`ConnectionAuth` bounds the whole
token request to 60 s), so a slow token endpoint cannot outlive the lock and let a second replica
spend the same refresh token.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .._exceptions import StoreCorrupt, StoreError
from .._grant import Grant, StoreKey
from ._store import KeyLocks

__all__ = ["RedisTokenStore"]

_log = logging.getLogger(__name__)


class RedisTokenStore:
    """Grants in Redis; `lock()` is a Redis lock, so replicas on different hosts refresh once."""

    def __init__(
        self, url: str, *, prefix: str = "agent-sdk:", lock_ttl: float = 120.0, lock_wait: float = 90.0
    ) -> None:
        try:
            import redis.asyncio as redis_asyncio
        except ImportError:  # pragma: no cover - the [redis] extra is missing
            raise StoreError("the Redis token store needs the redis package: pip install 'agent-sdk[redis]'") from None
        self._url = url
        self._prefix = prefix
        self._lock_ttl = lock_ttl
        self._lock_wait = lock_wait
        self._client: Any = redis_asyncio.Redis.from_url(url, decode_responses=True)
        self._locks = KeyLocks()

    @property
    def name(self) -> str:
        parts = urlsplit(self._url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))  # credentials never shown

    def __repr__(self) -> str:
        return f"RedisTokenStore({self.name!r})"

    async def __aenter__(self) -> RedisTokenStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    def _key(self, key: StoreKey) -> str:
        return f"{self._prefix}mcp-oauth:{key.holder}:{key.resource}"

    @property
    def _index(self) -> str:
        return f"{self._prefix}mcp-oauth:index"

    async def load(self, key: StoreKey) -> Grant | None:
        raw = await self._do(self._client.get(self._key(key)))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            raise StoreCorrupt(f"the Redis key {self._key(key)!r} at {self.name} is not valid JSON") from None
        return Grant.from_json(data, f"Redis key {self._key(key)!r} at {self.name}")

    async def save(self, grant: Grant) -> None:
        pipe = self._client.pipeline(transaction=True)
        pipe.set(self._key(grant.key), json.dumps(grant.to_json()))
        pipe.sadd(self._index, json.dumps(grant.key.parts()))
        await self._do(pipe.execute())

    async def delete(self, key: StoreKey) -> bool:
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(self._key(key))
        pipe.srem(self._index, json.dumps(key.parts()))
        removed, _ = await self._do(pipe.execute())
        return bool(removed)

    async def keys(self) -> list[StoreKey]:
        members = await self._do(self._client.smembers(self._index))
        found: list[StoreKey] = []
        for member in members:
            try:
                connection, resource, *principal = json.loads(member)
                if len(principal) > 1:
                    raise ValueError("too many parts")
            except (ValueError, TypeError):
                # As one damaged grant in the file: that one is left out, every other grant still listed.
                _log.warning("skipping a malformed member of the Redis set %s at %s", self._index, self.name)
                continue
            found.append(StoreKey(str(connection), str(resource), str(principal[0]) if principal else ""))
        return sorted(found)

    @asynccontextmanager
    async def lock(self, key: StoreKey) -> AsyncGenerator[None]:
        async with self._locks.hold(key):
            lock = self._client.lock(
                f"{self._prefix}mcp-oauth-lock:{key.holder}:{key.resource}",
                timeout=self._lock_ttl,
                blocking_timeout=self._lock_wait,
            )
            acquired = await self._do(lock.acquire())
            if not acquired:
                raise StoreError(f"timed out waiting for the refresh lock of {key} at {self.name}")
            try:
                yield
            finally:
                try:
                    await lock.release()
                except Exception:  # the TTL expired and another replica took it: nothing to release
                    pass

    async def _do(self, awaitable: Any) -> Any:
        import redis.exceptions

        try:
            return await awaitable
        except redis.exceptions.RedisError as exc:
            raise StoreError(f"the Redis token store at {self.name} failed ({type(exc).__name__})") from None
