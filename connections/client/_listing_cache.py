"""A small TTL cache of `tools/list` results for connections listed with static headers only.

Entries expire after `ttl` seconds (0 = never cache: list every time) and are dropped at once when
the upstream says its tools changed (`notifications/tools/list_changed`, or a `subscriptions/listen`
event from a 2026-07-28 upstream: `connections/client/_upstream_changes.py`). A listing that was in flight while the
change arrived is not stored (the generation counter), so a stale listing never lands. Every change
an upstream announces (tools, resources, prompts, one resource) also goes to the callbacks added
with `watch`, for whatever else must follow it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

import mcp_types as mt
from cachetools import TTLCache

from ._upstream_changes import Change

__all__ = ["DEFAULT_LISTING_TTL", "ChangeWatcher", "ListingCache"]

logger = logging.getLogger(__name__)

ChangeWatcher = Callable[[str, Change], None]
"""Called with the connection's name and what its upstream said changed."""

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
        self._watchers: list[ChangeWatcher] = []

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

    def changed(self, name: str, change: Change) -> None:
        """`name`'s upstream announced `change`: a tools change drops its listing now; every watcher is told."""
        if change.kind == "tools":
            self.invalidate(name)
        for watcher in list(self._watchers):
            try:
                watcher(name, change)
            except Exception:  # boundary: one watcher's fault must not stop the others or the session
                logger.exception("a listing-change watcher failed")

    def watch(self, watcher: ChangeWatcher) -> Callable[[], None]:
        """Call `watcher` for every change an upstream announces; returns the function that stops it."""
        self._watchers.append(watcher)

        def stop() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return stop
