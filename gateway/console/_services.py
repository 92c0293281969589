"""`ConsoleServices`: what the console's routes share, made in the app's lifespan.

The token store is the one `serve` reads (`state.token_store(settings)`: `mcp-auth.json`, the
keyring or Redis, as `--state-url` and `AGENT_SDK_TOKEN_STORE` choose), so a browser login is
stored where the connections read it. Pending browser logins live here, in memory, for `LOGIN_TTL` seconds.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2
from starlette.requests import Request

from oauth import LoginStart, TokenStore

from ..settings import ServeSettings
from ..state import token_store
from ._recent import RecentFailures

__all__ = ["LOGIN_TTL", "ConsoleServices", "PendingLogin", "console_of"]

LOGIN_TTL = 600.0
"""Seconds a started browser login waits for its redirect."""
_MAX_PENDING = 64


@dataclass(frozen=True, slots=True)
class PendingLogin:
    """One started browser login, found again by its `state` when the redirect arrives."""

    start: LoginStart
    started: float


@dataclass(slots=True)
class ConsoleServices:
    store: TokenStore
    http: httpx2.AsyncClient
    failures: RecentFailures = field(default_factory=RecentFailures)
    pending: dict[str, PendingLogin] = field(default_factory=dict[str, PendingLogin])

    def remember(self, state: str, login: PendingLogin) -> None:
        """Keep `login` until its redirect comes; the oldest are dropped past the cap (a flood cannot grow it)."""
        self.expire()
        while len(self.pending) >= _MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))
        self.pending[state] = login

    def take(self, state: str) -> PendingLogin | None:
        """The login `state` belongs to (once: a replayed redirect finds nothing)."""
        self.expire()
        return self.pending.pop(state, None)

    def expire(self) -> None:
        now = time.monotonic()
        for state in [s for s, p in self.pending.items() if now - p.started > LOGIN_TTL]:
            del self.pending[state]

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: ServeSettings) -> AsyncGenerator[ConsoleServices]:
        """Open the serving token store and an HTTP client for the authorization servers; close both after.

        Raises `oauth.StoreError` for a bad store choice (`serve` checks it before it starts)."""
        store = token_store(settings)
        try:
            async with httpx2.AsyncClient(timeout=30.0) as http:
                services = cls(store=store, http=http)
                with services.failures.watching():
                    yield services
        finally:
            await store.aclose()


def console_of(request: Request) -> ConsoleServices:
    """The lifespan's `ConsoleServices`."""
    return request.state.console
