"""`OfferCache`: upstream listings and reads kept as long as the upstream's cache hint allows.

MCP 2026-07-28 (SEP-2549) puts `ttlMs` and `cacheScope` on listing and read results. A `public` result
may be served to anyone; a `private` one only within the authorization context that asked for it, so
it is kept under the asking principal (`viewer`) and never handed to another. A result with a TTL of
0 (and every result of an upstream older than 2026-07-28, which sends no hint) is not kept at all.
`max_ttl` caps every entry (the gateway's listing TTL); `invalidate` drops a connection's entries at
once (a `list_changed` from its upstream, a restarted session).
"""

from __future__ import annotations

import time
from typing import Any

from cachetools import LRUCache

from ._offer_calls import Freshness

__all__ = ["OfferCache"]

_Key = tuple[str, str, str, str | None]
"""(connection, method, argument such as a URI, viewer or None for a public entry)"""


class OfferCache:
    """What an upstream answered, by connection, method and argument, for as long as its hint says."""

    def __init__(self, max_ttl: float, maxsize: int = 4096) -> None:
        self.max_ttl = max_ttl
        self._entries: LRUCache[_Key, tuple[float, Any, Freshness]] = LRUCache(maxsize=maxsize)
        self._generations: dict[str, int] = {}

    def generation(self, connection: str) -> int:
        """Take this before asking the upstream; pass it to `put` so an `invalidate` in between wins."""
        return self._generations.get(connection, 0)

    def get(self, connection: str, method: str, argument: str, viewer: str | None) -> tuple[Any, Freshness] | None:
        """A fresh answer that `viewer` may see: a public one, or a private one `viewer` itself caused."""
        now = time.monotonic()
        keys: list[_Key] = [(connection, method, argument, None)]
        if viewer is not None:
            keys.append((connection, method, argument, _viewer(viewer)))
        for key in keys:
            found = self._entries.get(key)
            if found is None:
                continue
            expires, value, hint = found
            if expires > now:
                return value, hint
            self._entries.pop(key, None)
        return None

    def put(
        self,
        connection: str,
        method: str,
        argument: str,
        viewer: str | None,
        value: Any,
        hint: Freshness,
        generation: int,
    ) -> None:
        """Keep `value` (asked at `generation`) if `hint` lets it be reused: a TTL over 0, and a viewer for a
        private one (a private answer asked without one is never kept)."""
        if hint.ttl_ms <= 0 or self.max_ttl <= 0 or generation != self.generation(connection):
            return
        seconds = min(hint.ttl_ms / 1000, self.max_ttl)
        if not hint.private:
            key: _Key = (connection, method, argument, None)
        elif viewer is not None:
            key = (connection, method, argument, _viewer(viewer))
        else:
            return
        self._entries[key] = (time.monotonic() + seconds, value, hint)

    def invalidate(self, connection: str) -> None:
        """Forget everything `connection` answered (its upstream said `list_changed`, or its session restarted)."""
        self._generations[connection] = self.generation(connection) + 1
        for key in [k for k in self._entries if k[0] == connection]:
            self._entries.pop(key, None)


def _viewer(viewer: str) -> str:
    return f"viewer:{viewer}"
