"""`BrowserClients`: where the browser sign-in keeps the client it registered at the IdP (`_browser.py`).

A `TokenStore` for `oauth.start_login` / `finish_login` that keeps only the client registration, never a
person's tokens, in this process's memory: the next sign-in reuses the registration, and each replica
registers once per start (a pending login carries its client, so another replica can finish it).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import replace

import anyio

from oauth import Grant, StoreKey

__all__ = ["BrowserClients"]


class BrowserClients:
    """The browser sign-in's client registrations (module docstring)."""

    name = "memory (browser sign-in clients)"

    def __init__(self) -> None:
        self._grants: dict[StoreKey, Grant] = {}
        self._lock = anyio.Lock()  # nothing is refreshed here: one lock does

    async def load(self, key: StoreKey) -> Grant | None:
        return self._grants.get(key)

    async def save(self, grant: Grant) -> None:
        self._grants[grant.key] = replace(grant, tokens=None, dpop_key=None)

    async def delete(self, key: StoreKey) -> bool:
        return self._grants.pop(key, None) is not None

    async def keys(self) -> list[StoreKey]:
        return sorted(self._grants, key=lambda k: (k.connection, k.resource, k.principal))

    def lock(self, key: StoreKey) -> AbstractAsyncContextManager[None]:
        return self._lock

    async def aclose(self) -> None:
        self._grants.clear()
