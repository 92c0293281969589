"""A small TTL cache of `tools/list` results for connections listed with static headers only.

Entries expire after `ttl` seconds (0 = never cache: list every time) and are dropped at once when
the upstream sends `notifications/tools/list_changed`. A listing that was in flight while the
notification arrived is not stored (the generation counter), so a stale listing never lands.
"""

from __future__ import annotations

import time
from collections import Counter

import mcp.types as mt
from cachetools import TTLCache

__all__ = ["DEFAULT_LISTING_TTL", "ListingCache"]

DEFAULT_LISTING_TTL = 30.0
"""Seconds a listing stays fresh when nothing says it changed."""


class ListingCache:
    """Connection name -> its filtered tool listing, with a TTL and `list_changed` invalidation."""

    def __init__(self, ttl: float = DEFAULT_LISTING_TTL, maxsize: int = 1024) -> None:
        self.ttl = ttl
        # name -> (the listing, the same by tool name)
        self._entries: TTLCache[str, tuple[tuple[mt.Tool, ...], dict[str, mt.Tool]]] | None = (
            TTLCache(maxsize=maxsize, ttl=ttl, timer=time.monotonic) if ttl > 0 else None
        )
        self._generations: dict[str, int] = {}
        self.hits: Counter[str] = Counter()
        """Listings answered from the cache, by connection (for the gateway's metrics)."""
        self.misses: Counter[str] = Counter()

    def generation(self, name: str) -> int:
        """Take this before listing; pass it to `put` so an invalidation in between wins."""
        return self._generations.get(name, 0)

    def get(self, name: str) -> list[mt.Tool] | None:
        """The fresh listing of `name`, or None."""
        if self._entries is None:
            return None
        found = self._entries.get(name)
        (self.hits if found is not None else self.misses)[name] += 1
        return list(found[0]) if found is not None else None

    def tool(self, name: str, tool: str) -> mt.Tool | None:
        """`tool` in the fresh listing of `name`, or None (no fresh listing, or not in it)."""
        if self._entries is None:
            return None
        found = self._entries.get(name)
        return found[1].get(tool) if found is not None else None

    def put(self, name: str, tools: list[mt.Tool], generation: int) -> None:
        """Store a listing taken at `generation` (dropped if `invalidate` ran since)."""
        if self._entries is not None and generation == self.generation(name):
            self._entries[name] = (tuple(tools), {t.name: t for t in tools})

    def invalidate(self, name: str) -> None:
        """Forget `name`'s listing (its upstream said `tools/list_changed`, or its session restarted)."""
        self._generations[name] = self.generation(name) + 1
        if self._entries is not None:
            self._entries.pop(name, None)
