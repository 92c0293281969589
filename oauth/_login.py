"""The login: discovery → client identity → PKCE authorization code flow on a loopback redirect → tokens.

MCP authorization spec 2025-11-25: PKCE S256, `state`, RFC 8707 `resource` on the authorization and
token requests, RFC 9207 `iss` checked exactly, scopes in the spec's order (the challenge's `scope`,
else the resource's `scopes_supported`, else the definition's `scopes`, else none).
"""

from __future__ import annotations

import hmac
import os
import socket
from collections.abc import Callable, Sequence
from urllib.parse import urlencode, urlsplit, urlunsplit

import anyio
import httpx2
from authlib.common.security import generate_token
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ._callback import CallbackListener, loopback_listener
from ._config import OAuthConfig
from ._discovery import Challenge, Discovery, ResourceMetadata, ServerMetadata, parse_www_authenticate
from ._exceptions import (
    AuthorizationDenied,
    IssuerMismatch,
    LoginTimeout,
    OAuthError,
    RegistrationError,
    StateMismatch,
)
from ._grant import ClientRegistration, Grant, StoreKey
from ._interaction import Interaction
from ._registration import register_client
from ._secret import Secret
from ._store import TokenStore
from ._tokens import exchange_code

__all__ = ["login", "probe_challenge"]

Status = Callable[[str], None]


async def probe_challenge(http: httpx2.AsyncClient, resource_url: str) -> Challenge | None:
    """POST an MCP `ping` without credentials and read the 401's `WWW-Authenticate` (None if not a 401)."""
    try:
        response = await http.post(
            resource_url,
            json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
        )
    except httpx2.HTTPError as exc:
        raise OAuthError(f"cannot reach {resource_url} ({type(exc).__name__})") from None
    if response.status_code != 401:
        return None
    return parse_www_authenticate(response.headers.get("www-authenticate"))


def choose_scopes(
    requested: Sequence[str] | None,
    challenge: Challenge | None,
    prm: ResourceMetadata | None,
    config: OAuthConfig,
) -> str | None:
    """MCP auth spec "Scope Selection Strategy", with the definition's scopes as the last resort."""
    if requested:
        return " ".join(dict.fromkeys(requested))
    if challenge is not None and challenge.scope:
        return challenge.scope
    if prm is not None and prm.scopes_supported:
        return " ".join(prm.scopes_supported)
    if config.scopes:
        return " ".join(config.scopes)
    return None


def _secret_method(asm: ServerMetadata) -> str:
    supported = asm.token_endpoint_auth_methods_supported
    if "client_secret_basic" in supported:
        return "client_secret_basic"
    if "client_secret_post" in supported:
        return "client_secret_post"
    return supported[0] if supported else "client_secret_basic"


def configured_client(config: OAuthConfig, asm: ServerMetadata) -> ClientRegistration | None:
    """A pre-registered client from the definition (its secret from `client_secret_env`), or None."""
    if config.client_id is None:
        return None
    secret: Secret | None = None
    if config.client_secret_env:
        value = os.environ.get(config.client_secret_env)
        if not value:
            raise RegistrationError(
                f"the client secret variable {config.client_secret_env} is not set; export it before logging in"
            )
        secret = Secret(value)
    method = _secret_method(asm) if secret else "none"
    return ClientRegistration(config.client_id, secret, method, source="configured")


def _port_of(uri: str | None) -> int:
    if not uri:
        return 0
    port = urlsplit(uri).port or 0
    if port:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return 0  # taken: native clients' loopback redirects may use any port (RFC 8252 §7.3)
    return port


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def check_redirect(params: dict[str, str], state: str, asm: ServerMetadata) -> str:
    """Validate the redirect; returns the code. Raises `StateMismatch`, `IssuerMismatch`, `AuthorizationDenied`."""
    if not hmac.compare_digest(params.get("state", "").encode(), state.encode()):
        raise StateMismatch(
            "the login redirect carried a different state than this login sent; it was not the answer to "
            "this request (a stale tab or a forged redirect), so nothing was saved; run the login again"
        )
    iss = params.get("iss")
    if iss is not None and iss != asm.issuer:
        raise IssuerMismatch(
            f"the login redirect says it came from {iss[:200]}, but this login went to {asm.issuer} (RFC 9207); "
            "refusing it as a possible mix-up attack"
        )
    if iss is None and asm.iss_parameter_supported:
        raise IssuerMismatch(
            f"the login redirect has no iss although {asm.issuer} promises one (RFC 9207); refusing it"
        )
    if "error" in params:
        code = params["error"][:60]
        description = params.get("error_description", "")[:200]
        detail = f": {description}" if description else ""
        if code == "access_denied":
            raise AuthorizationDenied(f"the authorization was denied at {asm.issuer} (access_denied{detail})")
        raise AuthorizationDenied(f"the authorization server {asm.issuer} refused the login ({code}{detail})")
    code = params.get("code")
    if not code:
        raise AuthorizationDenied("the login redirect carried neither a code nor an error")
    return code


async def login(
    connection: str,
    resource_url: str,
    config: OAuthConfig,
    store: TokenStore,
    *,
    interaction: Interaction,
    http: httpx2.AsyncClient | None = None,
    challenge: Challenge | None = None,
    scopes: Sequence[str] | None = None,
    login_timeout: float = 300.0,
    discovery: Discovery | None = None,
    status: Status | None = None,
) -> Grant:
    """Run the whole authorization-code + PKCE login for one connection and save the result in `store`.

    Raises `DiscoveryError`, `PkceUnsupported`, `RegistrationError`, `StateMismatch`, `IssuerMismatch`,
    `AuthorizationDenied`, `LoginTimeout`, `TokenError`, `StoreError` (all `OAuthError`).
    """
    say: Status = status or (lambda _text: None)
    owned = http is None
    client_http = http or httpx2.AsyncClient(timeout=30.0)
    try:
        finder = discovery or Discovery(client_http)
        if challenge is None:
            challenge = await probe_challenge(client_http, resource_url)
        prm = await finder.resource_metadata(resource_url, challenge)
        issuer = prm.authorization_servers[0] if prm else _origin(resource_url)  # 2025-03-26: the origin
        asm = await finder.server_metadata(issuer, legacy=prm is None)
        resource = prm.resource if prm else resource_url
        key = StoreKey(connection, resource_url)
        previous = await store.load(key)
        say(f"Authorization server: {asm.issuer}")

        client = configured_client(config, asm)
        if client is None and config.client_metadata_url and asm.client_id_metadata_document_supported:
            client = ClientRegistration(config.client_metadata_url, None, "none", source="metadata_document")
        if client is None and previous is not None and previous.issuer == asm.issuer:
            if previous.client.source == "dynamic":
                client = previous.client
        port = config.redirect_port or _port_of(client.redirect_uri if client else None)

        async with loopback_listener(port) as listener:
            if client is None:
                client = await register_client(client_http, asm, listener.redirect_uri, config)
                say(f"Registered client {client.client_id} with {asm.issuer}")
                # Persist the registration at once: a login that fails later still reuses this client.
                await store.save(
                    Grant(key, asm.issuer, asm.token_endpoint, client, None, resource, asm.revocation_endpoint)
                )
            verifier = generate_token(64)
            state = generate_token(32)
            params: dict[str, str] = {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": listener.redirect_uri,
                "state": state,
                "code_challenge": create_s256_code_challenge(verifier),
                "code_challenge_method": "S256",
                "resource": resource,
            }
            scope = choose_scopes(scopes, challenge, prm, config)
            if scope:
                params["scope"] = scope
            params.update(config.extra_authorize_params)
            separator = "&" if "?" in asm.authorization_endpoint else "?"
            url = f"{asm.authorization_endpoint}{separator}{urlencode(params)}"
            redirect = await _await_redirect(url, listener, interaction, login_timeout)

        code = check_redirect(redirect, state, asm)
        tokens = await exchange_code(
            client_http,
            asm.token_endpoint,
            client,
            code=code,
            redirect_uri=listener.redirect_uri,
            code_verifier=verifier,
            resource=resource,
        )
        grant = Grant(key, asm.issuer, asm.token_endpoint, client, tokens, resource, asm.revocation_endpoint)
        await store.save(grant)
        return grant
    finally:
        if owned:
            await client_http.aclose()


async def _await_redirect(
    url: str, listener: CallbackListener, interaction: Interaction, wait_seconds: float
) -> dict[str, str]:
    result: dict[str, str] | None = None
    error: OAuthError | None = None

    async def run_interaction() -> None:
        try:
            await interaction(url, listener)
        except OAuthError as exc:
            listener.fail(exc)
        except Exception as exc:  # a broken opener must end the wait with a sentence, not hang it
            listener.fail(OAuthError(f"the login could not be started ({type(exc).__name__})"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_interaction)
        with anyio.move_on_after(wait_seconds):
            try:
                result = await listener.wait()
            except OAuthError as exc:
                error = exc
        tg.cancel_scope.cancel()
    if error is not None:
        raise error
    if result is None:
        raise LoginTimeout(
            f"no login redirect reached {listener.redirect_uri} within {wait_seconds:g} seconds; run the login again "
            "(with --no-browser you can paste the URL the browser ended on)"
        )
    return result
