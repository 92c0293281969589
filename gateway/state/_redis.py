"""The Redis connection every piece of shared state uses (`--state-url`): one client shape, one redaction."""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import StateUnavailable

__all__ = ["check_reachable", "redis_client", "safe_url"]


def safe_url(url: str) -> str:
    """The URL without credentials, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redis_client(url: str, *, socket_timeout: float = 3.0) -> Any:
    """An asyncio Redis client that fails fast (one retry, for a pooled connection Redis closed) rather than
    holding a request while Redis is away. Raises `StateUnavailable` when the `redis` package is missing."""
    try:
        import redis.asyncio as redis_asyncio
        from redis.asyncio.retry import Retry  # the asyncio one: the sync `redis.retry.Retry` never retries here
        from redis.backoff import NoBackoff
    except ImportError:  # pragma: no cover - the [redis] extra is missing
        raise StateUnavailable("--state-url needs the redis package: pip install 'agent-sdk[redis]'") from None
    client = redis_asyncio.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=socket_timeout,
        socket_connect_timeout=2.0,
        retry=Retry(NoBackoff(), 1),
        health_check_interval=15,
    )
    pool = client.connection_pool
    pool.connection_class = _closed_write_is_a_connection_error(pool.connection_class)  # TCP, TLS or a socket
    return client


@functools.cache
def _closed_write_is_a_connection_error(base: type[Any]) -> type[Any]:
    """`base` (the pool's connection class), but a write on a transport already closed is a `ConnectionError`.

    uvloop raises `RuntimeError` ("unable to perform operation on <TCPTransport closed=True>") for a write
    on a closed transport, where asyncio raises an `OSError` that redis-py turns into its `ConnectionError`.
    Left a `RuntimeError`, it escaped every `except RedisError` of the state stores: a follower's event stream
    died with a traceback during a Redis restart. As a `ConnectionError` the client's retry reconnects and
    sends the command again (nothing of it was sent), and a store that still fails answers 503."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    class ClosedWriteIsAConnectionError(base):
        async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
            try:
                await super().send_packed_command(command, check_health)
            except RuntimeError as exc:  # base's own `except BaseException` has disconnected it already
                raise RedisConnectionError(f"writing to Redis failed: the connection is closed ({exc})") from None

    ClosedWriteIsAConnectionError.__name__ = ClosedWriteIsAConnectionError.__qualname__ = base.__name__
    return ClosedWriteIsAConnectionError


def check_reachable(url: str) -> None:
    """Raise `StateUnavailable` with one sentence (the URL without its password) unless Redis at `url` answers
    PING within a few seconds: what `serve` checks before it starts (docs/deploy.md, "Health checks")."""
    import redis
    from redis.exceptions import RedisError

    client = redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=3.0)
    try:
        client.ping()
    except (RedisError, OSError) as exc:
        raise StateUnavailable(
            f"the state store at {safe_url(url)} cannot be reached ({type(exc).__name__}); start Redis there, or fix "
            "--state-url (AGENT_SDK_STATE_URL: host, port, database, password), then start serve again"
        ) from None
    finally:
        client.close()
