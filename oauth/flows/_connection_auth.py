"""`connection_auth`: the `ConnectionAuth` of one oauth connection, with the login it may run by itself (a
`client_credentials` connection's, or a CLI's with an `Interaction`; never a principal's)."""

from __future__ import annotations

from collections.abc import Sequence

import httpx2

from .._config import OAuthConfig
from .._grant import Grant
from ..discovery._discovery import Challenge, Discovery
from ..stores._store import TokenStore
from ._auth import ConnectionAuth, LoginHandler
from ._interaction import Interaction
from ._login import login
from ._machine import machine_login

__all__ = ["connection_auth"]


def connection_auth(
    connection: str,
    resource_url: str,
    config: OAuthConfig,
    store: TokenStore,
    *,
    interaction: Interaction | None = None,
    refresh_margin: float = 60.0,
    max_step_ups: int = 2,
    login_timeout: float = 300.0,
    http: httpx2.AsyncClient | None = None,
    principal: str = "",
) -> ConnectionAuth:
    """The `httpx2.Auth` for an oauth connection: `httpx2.AsyncClient(auth=connection_auth(...))`.

    `config.grant == "client_credentials"`: the deployment logs in as itself whenever it needs a token
    (`oauth/flows/_machine.py`), serving included. Otherwise, `interaction=None` (serving): never starts a login;
    a connection without usable tokens raises
    `LoginRequired` naming the CLI command. With an `Interaction` (`follow_redirects()`, `open_browser()`)
    a 401 without tokens or a 403 insufficient_scope runs the login itself. `http` is the client used
    for token and metadata requests (default: one of its own, closed by `aclose()`). `principal`: the grant
    is that principal's own (`StoreKey.principal`; it never logs in by itself, whatever `interaction`).
    """
    auth: ConnectionAuth
    discovery_box: list[Discovery] = []
    machine = config.grant == "client_credentials"
    chosen = None if machine or principal else interaction

    async def handler_impl(challenge: Challenge | None, scopes: Sequence[str] | None) -> Grant:
        client = auth._client  # pyright: ignore[reportPrivateUsage]
        if not discovery_box:
            discovery_box.append(Discovery(client))
        finder = discovery_box[0]
        if chosen is None:  # client credentials: the deployment logs in as itself
            return await machine_login(
                connection,
                resource_url,
                config,
                store,
                http=client,
                discovery=finder,
                challenge=challenge,
                scopes=scopes,
            )
        return await login(
            connection,
            resource_url,
            config,
            store,
            interaction=chosen,
            http=client,
            challenge=challenge,
            scopes=scopes,
            login_timeout=login_timeout,
            discovery=finder,
        )

    handler: LoginHandler | None = handler_impl if (machine and not principal) or chosen is not None else None
    auth = ConnectionAuth(
        connection,
        resource_url,
        config,
        store,
        login_handler=handler,
        refresh_margin=refresh_margin,
        max_step_ups=max_step_ups,
        http=http,
        principal=principal,
    )
    return auth
