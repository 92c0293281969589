"""`ConsoleServices`: what the console's routes share, made in the app's lifespan.

The token store is the one `serve` reads (`state.token_store(settings)`: `mcp-auth.json`, the
keyring or Redis, as `--state-url` and `AGENT_SDK_TOKEN_STORE` choose), so a browser login is
stored where the connections read it. Started browser logins wait in `pending` (`pending_logins.py`:
in memory, or with `--state-url` sealed in the Redis every replica shares) for `LOGIN_TTL` seconds.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import httpx2
from starlette.requests import Request

from oauth import TokenStore

from ..pending_logins import PendingLogins
from ..request_state import RequestStates
from ..settings import ServeSettings
from ..state import serving_pending_logins, token_store
from ._recent import RecentFailures

__all__ = ["ConsoleServices", "console_of"]


@dataclass(slots=True)
class ConsoleServices:
    store: TokenStore
    http: httpx2.AsyncClient
    pending: PendingLogins
    sealer: RequestStates
    """The deployment's key: seals the cookie that binds a started login to its browser (`_login.py`)."""
    failures: RecentFailures = field(default_factory=RecentFailures)

    @classmethod
    @asynccontextmanager
    async def running(cls, settings: ServeSettings, sealer: RequestStates) -> AsyncGenerator[ConsoleServices]:
        """Open the serving token store, the pending logins (sealed with `sealer`, the deployment's key) and an
        HTTP client for the authorization servers; close them after.

        Raises `oauth.StoreError` for a bad store choice (`serve` checks it before it starts)."""
        store = token_store(settings)
        try:
            async with AsyncExitStack() as stack, httpx2.AsyncClient(timeout=30.0) as http:
                pending = serving_pending_logins(settings, sealer, stack)
                services = cls(store=store, http=http, pending=pending, sealer=sealer)
                with services.failures.watching():
                    yield services
        finally:
            await store.aclose()


def console_of(request: Request) -> ConsoleServices:
    """The lifespan's `ConsoleServices`."""
    return request.state.console
