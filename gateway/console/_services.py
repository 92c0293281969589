"""`ConsoleServices`: what the console's routes share, made in the app's lifespan.

The token store is the one `serve` reads (`state.token_store(settings)`: `mcp-auth.json`, the
keyring or Redis, as `--state-url` and `AGENT_SDK_TOKEN_STORE` choose), so a browser login is
stored where the connections read it. Started browser logins wait in `pending` (`gateway/state/pending_logins.py`:
in memory, or with `--state-url` sealed in the Redis every replica shares) for `LOGIN_TTL` seconds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import httpx2
from starlette.requests import Request

from oauth import TokenStore

from ..logs import ACTION_EVENT
from ..runtime import principal_of
from ..settings import ServeSettings
from ..state.pending_logins import PendingLogins
from ..state.request_state import RequestStates
from ..stores import serving_pending_logins, token_store
from ._clients import BrowserClients
from ._recent import RecentRecords

__all__ = ["ACTION_EVENT", "ConsoleServices", "console_of", "record_action", "signed_in"]

_actions_log = logging.getLogger("agent_sdk.console")


@dataclass(slots=True)
class ConsoleServices:
    store: TokenStore
    http: httpx2.AsyncClient
    pending: PendingLogins
    sealer: RequestStates
    """The deployment's key: seals the cookie that binds a started login to its browser (`_login.py`)."""
    failures: RecentRecords = field(default_factory=RecentRecords)
    log: RecentRecords = field(default_factory=lambda: RecentRecords(200, logging.INFO, skip=("agent_sdk.access",)))
    actions: RecentRecords = field(default_factory=lambda: RecentRecords(50, logging.INFO, event=ACTION_EVENT))
    browser_clients: BrowserClients = field(default_factory=BrowserClients)
    """The client the browser sign-in registered at the IdP (`_browser.py`): a registration, never tokens."""
    forget_tokens: Callable[[str, str | None], None] | None = None
    """The broker's `forget_tokens` (a logout drops the grant its connection holds in memory), set by the app."""

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
                with services.failures.watching(), services.log.watching(), services.actions.watching():
                    yield services
        finally:
            await store.aclose()


def record_action(request: Request, action: str, connection: str, outcome: str, *, who: str | None = None) -> None:
    """Log an operator's action (restart, login, logout) at INFO: an action, not a failure. Names who acted
    by principal kind (`who` for the login callback, which the authorization server's redirect reaches) and
    the connection, never a credential."""
    who = who or principal_of(request).kind
    _actions_log.info(
        "operator (%s) %s connection %r: %s",
        who,
        action,
        connection,
        outcome,
        extra={"event": ACTION_EVENT, "action": action, "connection": connection},
    )


def signed_in(connection: str) -> None:
    """Log a principal's sign-in to its own grant of `connection` (never who: the principal is not named)."""
    _actions_log.info(
        "a principal signed in to connection %r with its own account",
        connection,
        extra={"event": "principal_sign_in", "connection": connection},
    )


def console_of(request: Request) -> ConsoleServices:
    """The lifespan's `ConsoleServices`."""
    return request.state.console
