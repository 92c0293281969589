"""The Redis connection every piece of shared state uses (`--state-url`): one client shape, one redaction."""

from __future__ import annotations

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
    return redis_asyncio.Redis.from_url(
        url,
        decode_responses=True,
        socket_timeout=socket_timeout,
        socket_connect_timeout=2.0,
        retry=Retry(NoBackoff(), 1),
        health_check_interval=15,
    )


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
