"""`RedisHubKeyStore`: the hub's API keys in Redis, shared by every replica (`--state-url`, docs/deploy.md).

The hash `agent-sdk:hub-keys` maps a key id to its stored record (the same JSON as a record of
`hub-keys.json`: id, account, connectors, created, revoked, the key's SHA-256; never the key). The
CLI (`AGENT_SDK_STATE_URL=redis://... agent-sdk hub keys ...`) writes it; a serving replica keeps a
copy it re-reads every second, so a `revoke` takes effect on every replica within about a second.
Fail closed: when the copy could not be refreshed for `max_stale_s`, no key is admitted until it is.
A record that is not one the CLI wrote is skipped (its key admits no one), never every key with it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

from oauth._shared import Secret, printable

from ..state._redis import redis_client, safe_url
from .hub_keys import HubKey, HubKeyError, from_record, match, new_key, revoked, to_record

__all__ = ["RedisHubKeyStore"]

logger = logging.getLogger("agent_sdk.hub")


class RedisHubKeyStore:
    """Management calls (`create`, `list`, `revoke`) block (the CLI's); `authenticate` reads the copy `serving()`
    keeps."""

    def __init__(self, url: str, *, prefix: str = "agent-sdk:", max_stale_s: float = 5.0) -> None:
        self._url = url
        self.name = safe_url(url)
        self._hash = f"{prefix}hub-keys"
        self._max_stale_s = max_stale_s
        self._cached: list[HubKey] = []
        self._fresh_at = float("-inf")
        self._failing = False
        self._damaged: set[str] = set()

    def __repr__(self) -> str:
        return f"RedisHubKeyStore({self.name!r})"

    # -- management (the CLI) -------------------------------------------------------------------

    def create(self, account: str, connectors: tuple[str, ...] | None) -> tuple[HubKey, Secret]:
        """A new key for `account` (shown once, never stored). Raises `HubKeyError` (bad name, Redis away)."""
        record, key = new_key(account, connectors)
        self._sync(lambda r: r.hset(self._hash, record.id, json.dumps(to_record(record))))
        return record, key

    def list(self) -> list[HubKey]:
        """Every record, revoked ones included, oldest first. Raises `HubKeyError`."""
        raw: dict[str, str] = self._sync(lambda r: r.hgetall(self._hash))
        return self._parse(raw)

    def revoke(self, key_id: str) -> HubKey:
        """Mark `key_id` revoked (idempotent). Raises `HubKeyError` for an unknown id or Redis away."""
        raw = self._sync(lambda r: r.hget(self._hash, key_id))
        if raw is None:
            raise HubKeyError(f"no key with id {key_id[:40]!r}; see agent-sdk hub keys list")
        record = revoked(self._one(raw))
        self._sync(lambda r: r.hset(self._hash, key_id, json.dumps(to_record(record))))
        return record

    # -- serving ----------------------------------------------------------------------------------

    def authenticate(self, presented: str) -> HubKey | None:
        """The active record matching `presented` (constant time), else None. Raises `HubKeyError` when the copy
        is older than `max_stale_s` (Redis unreachable): no one is admitted on stale keys."""
        if anyio.current_time() - self._fresh_at > self._max_stale_s:
            raise HubKeyError(f"the hub keys at {self.name} could not be read lately; no key is admitted until then")
        return match(self._cached, presented)

    @asynccontextmanager
    async def serving(self, every_s: float = 1.0) -> AsyncGenerator[RedisHubKeyStore]:
        """Keep the copy fresh (read now, then every `every_s`) until the block ends."""
        client = redis_client(self._url)
        try:
            async with anyio.create_task_group() as tg:
                await self._refresh(client)
                tg.start_soon(self._refresh_forever, client, every_s)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await client.aclose()

    async def _refresh_forever(self, client: Any, every_s: float) -> None:
        while True:
            await anyio.sleep(every_s)
            await self._refresh(client)

    async def _refresh(self, client: Any) -> None:
        import redis.exceptions

        try:
            self._cached = self._parse(await client.hgetall(self._hash))
            self._fresh_at = anyio.current_time()
            self._failing = False
        except (redis.exceptions.RedisError, HubKeyError) as exc:
            if not self._failing:  # once per outage, not once a second
                logger.warning("could not read the hub keys at %s (%s)", self.name, type(exc).__name__)
                self._failing = True

    # -- Redis ----------------------------------------------------------------------------------------

    def _sync(self, op: Callable[[Any], Any]) -> Any:
        import redis
        import redis.exceptions

        client = redis.Redis.from_url(self._url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5)
        try:
            return op(client)
        except redis.exceptions.RedisError as exc:
            raise HubKeyError(f"cannot use the hub keys at {self.name} ({type(exc).__name__}); is Redis up?") from None
        finally:
            client.close()

    def _one(self, raw: str) -> HubKey:
        try:
            return from_record(json.loads(raw), f"the Redis hash {self._hash!r} at {self.name}")
        except ValueError:
            raise HubKeyError(f"the Redis hash {self._hash!r} at {self.name} holds a record that is not JSON") from None

    def _parse(self, raw: dict[str, str]) -> list[HubKey]:
        """The records, oldest first. One that is not a record this CLI wrote is skipped (its key is then refused,
        the others still work) and logged by its field, never its value: as a damaged record would be."""
        keys: list[HubKey] = []
        for field, value in raw.items():
            try:
                keys.append(self._one(value))
            except HubKeyError:
                if field not in self._damaged:
                    self._damaged.add(field)
                    logger.warning(
                        "skipping the hub key record %s in the Redis hash %s at %s: it is not one agent-sdk wrote",
                        printable(field, 64),
                        self._hash,
                        self.name,
                    )
        return sorted(keys, key=lambda k: (k.created, k.id))
