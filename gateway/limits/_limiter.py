"""`Limiter`: the project's limits checked before each call, on Redis across replicas or in this process.

The counting is the `limits` package's moving window (`MovingWindowRateLimiter`): on Redis one Lua script
per hit checks the window and adds the call in one step, so two replicas never both take the last slot;
without `--state-url` its in-memory storage does the same in this process (docs/architecture.md).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from ..errors import CallRefused
from ._rules import LimitRule

__all__ = ["Limiter", "LimitsUnavailable", "RateLimited", "limits_storage"]

logger = logging.getLogger("gateway.limits")

_SCHEMES = {"redis": "async+redis", "rediss": "async+rediss", "unix": "async+redis+unix"}


class RateLimited(CallRefused):
    status = 429
    code = "rate_limited"
    rpc_code = -32029

    def __init__(self, message: str, retry_after: int, **extra: Any) -> None:
        super().__init__(message, retryAfterS=retry_after, **extra)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str] | None:
        return {"retry-after": str(self.retry_after)}  # RFC 9110 §10.2.3: delay-seconds


class LimitsUnavailable(CallRefused):
    status = 503
    code = "limits_unavailable"
    rpc_code = -32004


def limits_storage(state_url: str | None) -> Storage:
    """Redis at `state_url` (redis-py, the client the rest of the gateway uses), else this process's memory."""
    if state_url is None:
        return MemoryStorage()
    scheme, _, rest = state_url.partition("://")
    return RedisStorage(
        f"{_SCHEMES.get(scheme, scheme)}://{rest}", implementation="redispy", key_prefix="agent-sdk:limits"
    )


class Limiter:
    """Admits a call when every rule that applies to it has room, counting it against each."""

    def __init__(self, rules: Sequence[LimitRule], storage: Storage | None = None) -> None:
        self.rules = tuple(rules)
        self.storage = storage if storage is not None else MemoryStorage()
        self._strategy = MovingWindowRateLimiter(self.storage)
        self.refused = 0
        self.refused_counter: Any = None
        """A prometheus `Counter` with labels (tool,) counting refusals; set by the app."""

    async def admit(self, principal: str, tool: str, connection: str | None) -> None:
        """Count the call against every rule that applies. Raises `RateLimited` (with the seconds until the
        fullest window has room) or `LimitsUnavailable` (the shared store does not answer: fail closed).

        Rules are checked in file order; a call refused by one still counts against those before it."""
        if not self.rules:
            return
        for rule in self.rules:
            if not rule.applies(principal, tool, connection):
                continue
            ids = rule.identifiers(principal, tool, connection)
            try:
                if await self._strategy.hit(rule.item, *ids):
                    continue
                stats = await self._strategy.get_window_stats(rule.item, *ids)
            except Exception as exc:  # boundary: redis-py's errors, as the `limits` storage raises them
                logger.warning("the rate limit store cannot be reached (%s); calls are refused", type(exc).__name__)
                raise LimitsUnavailable(
                    "the rate limit store (Redis at --state-url) cannot be reached, so this call is refused; retry "
                    "once it answers"
                ) from None
            retry = max(1, math.ceil(stats.reset_time - time.time()))
            self.refused += 1
            if self.refused_counter is not None:
                self.refused_counter.labels(tool).inc()
            raise RateLimited(
                f"rate limit {rule.text} (limit {rule.index + 1} of agent/limits.toml, per "
                f"{' and '.join(rule.per)}) reached for tool {tool[:64]!r}; retry after {retry} s",
                retry,
            )
