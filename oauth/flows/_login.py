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
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from .._config import OAuthConfig
from .._exceptions import (
    AuthorizationDenied,
    InvalidClient,
    IssuerMismatch,
    LoginTimeout,
    OAuthError,
    RegistrationError,
    StateMismatch,
    TokenError,
)
from .._grant import ClientRegistration, Grant, StoreKey
from .._shared import Secret, printable
from ..discovery._discovery import Challenge, Discovery, ResourceMetadata, ServerMetadata, parse_www_authenticate
from ..discovery._transport import require_secure
from ..stores._store import TokenStore
from ._callback import CallbackListener, loopback_listener
from ._dpop import Binding, binding, bound_key, new_key
from ._interaction import Interaction
from ._registration import register_client
from ._tokens import exchange_code

__all__ = ["login", "probe_challenge"]

Status = Callable[[str], None]


async def probe_challenge(http: httpx2.AsyncClient, resource_url: str) -> Challenge | None:
    """POST an MCP `ping` without credentials and read the 401's `WWW-Authenticate` (None if not a 401).

    Raises `InsecureTransport` (before any request) for a plain-http URL outside loopback."""
    require_secure(resource_url, "MCP server URL")
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
    previous: Grant | None = None,
) -> str | None:
    """MCP auth spec "Scope Selection Strategy", with the definition's scopes as the last resort; a step-up that
    `previous` records (held and challenged scopes, `Grant.step_up`) comes before the probe's challenge."""
    if requested:
        return " ".join(dict.fromkeys(requested))
    if previous is not None and previous.step_up:
        return previous.step_up
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


def declared_client(config: OAuthConfig, asm: ServerMetadata) -> ClientRegistration | None:
    """The client the definition names: a pre-registered one, else its metadata-document URL when the
    server supports those; None when the login must reuse or register one."""
    client = configured_client(config, asm)
    if client is None and config.client_metadata_url and asm.client_id_metadata_document_supported:
        client = ClientRegistration(config.client_metadata_url, None, "none", source="metadata_document")
    return client


@dataclass(frozen=True, slots=True)
class Found:
    """What discovery found for one resource: the 401's challenge, its metadata, its server's metadata."""

    challenge: Challenge | None
    prm: ResourceMetadata | None
    asm: ServerMetadata
    resource: str


async def discover(
    http: httpx2.AsyncClient,
    resource_url: str,
    challenge: Challenge | None,
    finder: Discovery | None = None,
    *,
    authorization_server: str | None = None,
) -> Found:
    """Probe for the challenge (unless given), then the resource's and its authorization server's metadata.
    `authorization_server`: the resource's server when the caller knows it already (a resource logging a
    browser in to itself): no probe, no resource metadata, only the server's."""
    finder = finder or Discovery(http)
    if authorization_server is not None:
        return Found(None, None, await finder.server_metadata(authorization_server), resource_url)
    if challenge is None:
        challenge = await probe_challenge(http, resource_url)
    prm = await finder.resource_metadata(resource_url, challenge)
    issuer = prm.authorization_servers[0] if prm else _origin(resource_url)  # 2025-03-26: the origin
    asm = await finder.server_metadata(issuer, legacy=prm is None)
    return Found(challenge, prm, asm, prm.resource if prm else resource_url)


async def redeem(
    http: httpx2.AsyncClient,
    store: TokenStore,
    key: StoreKey,
    asm: ServerMetadata,
    client: ClientRegistration,
    code: str,
    redirect_uri: str,
    verifier: str,
    resource: str,
    bind: Binding = "off",
) -> Grant:
    """Exchange the code (PKCE verifier, RFC 8707 resource) and save the grant, DPoP-bound per `bind`. A client
    the server no longer knows (`invalid_client`) is saved as dead, so the next login registers again."""
    try:
        dpop = new_key(bind)  # RFC 9449: a key of this grant's own
        tokens = await exchange_code(
            http,
            asm.token_endpoint,
            client,
            code=code,
            redirect_uri=redirect_uri,
            code_verifier=verifier,
            resource=resource,
            dpop=dpop,
        )
    except InvalidClient:
        dropped = Grant(key, asm.issuer, asm.token_endpoint, client, None, resource, asm.revocation_endpoint)
        await store.save(dropped.killed(InvalidClient.error))
        raise
    if bind == "required" and tokens.token_type != "DPoP":
        raise TokenError(
            f"connection {key.connection!r} needs DPoP-bound tokens (dpop=True, or its server requires them), and "
            f"the authorization server {printable(asm.issuer)} issued a Bearer token although the request carried "
            "a DPoP proof; nothing was saved: enable DPoP at the authorization server, or set dpop=False"
        )
    grant = Grant(
        key,
        asm.issuer,
        asm.token_endpoint,
        client,
        tokens,
        resource,
        asm.revocation_endpoint,
        dpop_key=bound_key(tokens.token_type, dpop),
    )
    await store.save(grant)
    return grant


def _port_of(uri: str | None) -> int:
    if not uri:
        return 0
    port = urlsplit(uri).port or 0
    if port:
        with socket.socket() as probe:
            # The listener binds with SO_REUSEADDR; so must the probe, or the last login's TIME_WAIT
            # sockets make a free port look taken and the redirect URI changes between logins.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
    issuer = printable(asm.issuer)
    if iss is not None and iss != asm.issuer:
        raise IssuerMismatch(
            f"the login redirect says it came from {printable(iss)}, but this login went to {issuer} (RFC 9207); "
            "refusing it as a possible mix-up attack"
        )
    if iss is None and asm.iss_parameter_supported:
        raise IssuerMismatch(f"the login redirect has no iss although {issuer} promises one (RFC 9207); refusing it")
    if "error" in params:
        code = printable(params["error"], 60)
        description = printable(params.get("error_description", ""))
        detail = f": {description}" if description else ""
        if code == "access_denied":
            raise AuthorizationDenied(f"the authorization was denied at {issuer} (access_denied{detail})")
        raise AuthorizationDenied(f"the authorization server {issuer} refused the login ({code}{detail})")
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
    verify_client: bool = False,
    principal: str = "",
) -> Grant:
    """Run the whole authorization-code + PKCE login for one connection and save the result in `store`.

    `verify_client`: before sending a person to the authorization page with a stored registration,
    check (one GET, no redirects followed) that the server still knows the client; when it answers
    400/401 the registration is dropped and the client registers again (the CLI sets this). `principal`: the
    grant is that principal's own (`StoreKey.principal`; the CLI logs in so for the `serve --stdio` peer).

    Raises `InsecureTransport`, `DiscoveryError`, `PkceUnsupported`, `RegistrationError`, `StateMismatch`,
    `IssuerMismatch`, `AuthorizationDenied`, `LoginTimeout`, `TokenError`, `StoreError` (all `OAuthError`).
    """
    say: Status = status or (lambda _text: None)
    owned = http is None
    client_http = http or httpx2.AsyncClient(timeout=30.0)
    try:
        found = await discover(client_http, resource_url, challenge, discovery)
        challenge, prm, asm, resource = found.challenge, found.prm, found.asm, found.resource
        key = StoreKey(connection, resource_url, principal)
        previous = await store.load(key)
        say(f"Authorization server: {printable(asm.issuer)}")

        client = declared_client(config, asm)
        reused = False
        if client is None and previous is not None and previous.issuer == asm.issuer:
            # A registration the server refused (invalid_client) is never reused: register again once.
            if previous.client.source == "dynamic" and previous.dead != "invalid_client":
                client, reused = previous.client, True
        port = config.redirect_port or _port_of(client.redirect_uri if client else None)

        async with loopback_listener(port) as listener:
            verifier = generate_token(64)
            state = generate_token(32)
            listener.expect(state)
            scope = choose_scopes(scopes, challenge, prm, config, previous)
            if reused and verify_client and client is not None:
                if not await _client_known(
                    client_http,
                    authorization_url(asm, client, listener.redirect_uri, state, verifier, resource, scope, config),
                ):
                    known = f"{printable(asm.issuer)} no longer knows client {printable(client.client_id)}"
                    say(f"{known}; registering again")
                    client = None
            if client is None:
                client = await register_client(client_http, asm, listener.redirect_uri, config)
                say(f"Registered client {printable(client.client_id)} with {printable(asm.issuer)}")
                # Persist the registration at once: a login that fails later still reuses this client.
                await store.save(
                    Grant(key, asm.issuer, asm.token_endpoint, client, None, resource, asm.revocation_endpoint)
                )
            url = authorization_url(asm, client, listener.redirect_uri, state, verifier, resource, scope, config)
            redirect = await _await_redirect(url, listener, interaction, login_timeout)

        code = check_redirect(redirect, state, asm)
        bind = binding(config.dpop, challenge, prm, client)
        return await redeem(client_http, store, key, asm, client, code, listener.redirect_uri, verifier, resource, bind)
    finally:
        if owned:
            await client_http.aclose()


def authorization_url(
    asm: ServerMetadata,
    client: ClientRegistration,
    redirect_uri: str,
    state: str,
    verifier: str,
    resource: str,
    scope: str | None,
    config: OAuthConfig,
) -> str:
    """The authorization request (authlib's `prepare_grant_uri`): PKCE S256, state, RFC 8707 resource."""
    return prepare_grant_uri(
        require_secure(asm.authorization_endpoint, "authorization endpoint"),
        client.client_id,
        "code",
        redirect_uri=redirect_uri,
        scope=scope,
        state=state,
        code_challenge=create_s256_code_challenge(verifier),
        code_challenge_method="S256",
        resource=resource,
        **config.extra_authorize_params,
    )


async def _client_known(http: httpx2.AsyncClient, url: str) -> bool:
    """False when the authorization endpoint refuses the request outright (400/401: an unknown client
    or an unregistered redirect URI, RFC 6749 §4.1.2.1); anything else (a redirect, a login page) is a
    known client. Only the status is read; nothing is followed."""
    try:
        response = await http.get(url, follow_redirects=False)
    except httpx2.HTTPError:
        return True  # unreachable now: the browser will say so, not a registration problem
    return response.status_code not in (400, 401)


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
