"""A login whose redirect comes back to a web route instead of a loopback listener, in two steps.

`start_login` runs discovery, picks the client (the definition's, a stored registration made for
this same redirect URI, or a new registration) and answers a `LoginStart`: the authorization URL to
send the browser to, and what `finish_login` needs when the redirect arrives. Keep it on the server:
it holds the PKCE verifier. `finish_login` checks the redirect (`state`, RFC 9207 `iss`, an error),
exchanges the code and saves the grant. The CLI's `login` runs the same pieces (`_login.py`) with a
loopback listener in between.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx2
from authlib.common.security import generate_token

from ._config import OAuthConfig
from ._discovery import Challenge, ServerMetadata
from ._grant import ClientRegistration, Grant, StoreKey
from ._login import authorization_url, check_redirect, choose_scopes, declared_client, discover, redeem
from ._registration import register_client
from ._secret import Secret
from ._store import TokenStore

__all__ = ["LoginStart", "finish_login", "start_login"]


@dataclass(frozen=True, slots=True)
class LoginStart:
    """One started login, to find again by its `state` when the redirect arrives (never shown to anyone)."""

    key: StoreKey
    server: ServerMetadata
    client: ClientRegistration
    redirect_uri: str
    resource: str
    state: Secret
    verifier: Secret
    authorization_url: str = field(repr=False)
    """Where to send the browser: PKCE S256, `state`, RFC 8707 `resource`, the chosen scopes."""


async def start_login(
    connection: str,
    resource_url: str,
    config: OAuthConfig,
    store: TokenStore,
    *,
    redirect_uri: str,
    http: httpx2.AsyncClient,
    challenge: Challenge | None = None,
) -> LoginStart:
    """Discovery and the client for a login that comes back to `redirect_uri`.

    Raises `InsecureTransport`, `DiscoveryError`, `PkceUnsupported`, `RegistrationError`, `StoreError`."""
    found = await discover(http, resource_url, challenge)
    asm = found.asm
    key = StoreKey(connection, resource_url)
    client = declared_client(config, asm)
    if client is None:
        previous = await store.load(key)
        if (
            previous is not None
            and previous.issuer == asm.issuer
            and previous.client.source == "dynamic"
            and previous.client.redirect_uri == redirect_uri
            and previous.dead != "invalid_client"
        ):
            client = previous.client
    if client is None:
        client = await register_client(http, asm, redirect_uri, config)
    state, verifier = generate_token(32), generate_token(64)
    scope = choose_scopes(None, found.challenge, found.prm, config)
    url = authorization_url(asm, client, redirect_uri, state, verifier, found.resource, scope, config)
    return LoginStart(key, asm, client, redirect_uri, found.resource, Secret(state), Secret(verifier), url)


async def finish_login(
    start: LoginStart, params: dict[str, str], store: TokenStore, *, http: httpx2.AsyncClient
) -> Grant:
    """Check the redirect's query `params` against `start`, exchange the code and save the grant.

    Raises `StateMismatch`, `IssuerMismatch`, `AuthorizationDenied`, `TokenError`, `StoreError`."""
    code = check_redirect(params, start.state.reveal(), start.server)
    return await redeem(
        http,
        store,
        start.key,
        start.server,
        start.client,
        code,
        start.redirect_uri,
        start.verifier.reveal(),
        start.resource,
    )
