"""Token endpoint requests: code exchange, refresh (RFC 6749 §4.1.3, §6), client credentials (§4.4)
and revocation (RFC 7009).

authlib builds the bodies (`prepare_token_request`, `prepare_revoke_token_request`), the client
authentication (`ClientAuth`: `none`, `client_secret_basic`, `client_secret_post`) and the RFC 7523
client assertion (`private_key_jwt_sign`); this module sends them over our `httpx2` client (each URL
held to the TLS rule first) and turns every answer into a `TokenSet` or one `TokenError` sentence.
The server's own words (`error`, `error_description`) pass through `printable` first.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import httpx2
import pydantic
from authlib.common.encoding import to_unicode
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7009 import prepare_revoke_token_request
from authlib.oauth2.rfc7523 import private_key_jwt_sign

from .._exceptions import AuthorizationServerUnreachable, InvalidClient, InvalidGrant, InvalidTarget, TokenError
from .._grant import ClientRegistration, TokenSet
from .._shared import Secret, printable
from ..discovery._transport import require_secure
from ._dpop import DpopKey, dpop_post

__all__ = [
    "client_credentials_token",
    "exchange_code",
    "parse_token_response",
    "refresh_tokens",
    "revoke",
    "token_post",
]

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

_FORM = "application/x-www-form-urlencoded"


class _TokenWire(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    access_token: str = pydantic.Field(min_length=1)
    token_type: str
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


async def token_post(
    http: httpx2.AsyncClient, endpoint: str, client: ClientRegistration, body: str, *, dpop: DpopKey | None = None
) -> httpx2.Response:
    """POST `body` to a token endpoint as `client` (with a DPoP proof for `dpop`'s grant). Raises
    `AuthorizationServerUnreachable`, `DpopNonceLoop`, `InsecureTransport`."""
    require_secure(endpoint, "token endpoint")
    secret = client.client_secret.reveal() if client.client_secret else None
    headers: dict[str, str] = {"Content-Type": _FORM, "Accept": "application/json"}
    if client.token_endpoint_auth_method == "private_key_jwt":
        # RFC 7523 §2.2 / SEP-1046: iss = sub = client_id, aud = the authorization server's issuer.
        assertion = private_key_jwt_sign(
            secret, client.client_id, client.audience or endpoint, alg=client.assertion_alg or "RS256"
        )
        fields = {"client_id": client.client_id, "client_assertion_type": ASSERTION_TYPE}
        body = f"{body}&{urlencode({**fields, 'client_assertion': to_unicode(assertion)})}"
    else:
        auth = ClientAuth(client.client_id, secret, client.token_endpoint_auth_method)
        _, headers, body = auth.prepare("POST", endpoint, headers, body)
    if dpop is not None:
        return await dpop_post(http, endpoint, body.encode(), headers, dpop)
    try:
        return await http.post(endpoint, content=body.encode(), headers=headers)
    except httpx2.HTTPError as exc:
        raise AuthorizationServerUnreachable(f"cannot reach {endpoint} ({type(exc).__name__})") from None


def parse_token_response(
    response: httpx2.Response, endpoint: str, previous_refresh: Secret | None, *, dpop: DpopKey | None = None
) -> TokenSet:
    """A token response as a `TokenSet` (a `DPoP` token only for a request that sent a proof). Raises `TokenError`
    and its subclasses by the server's `error`."""
    try:
        data: Any = response.json()
    except ValueError:
        data = None
    if response.status_code != 200:
        code = data.get("error") if isinstance(data, dict) else None
        if not isinstance(code, str):
            raise TokenError(
                f"the token endpoint {endpoint} answered HTTP {response.status_code} without an OAuth error"
            )
        description = data.get("error_description") if isinstance(data, dict) else None
        detail = f" ({printable(description)})" if isinstance(description, str) and description else ""
        cls = {"invalid_grant": InvalidGrant, "invalid_client": InvalidClient, "invalid_target": InvalidTarget}.get(
            code, TokenError
        )
        raise cls(f"the token endpoint {endpoint} refused the request: {printable(code, 60)}{detail}")
    try:
        wire = _TokenWire.model_validate(data)
    except pydantic.ValidationError:
        raise TokenError(
            f"the token endpoint {endpoint} answered HTTP 200 with something that is not an OAuth token response"
        ) from None
    kind = wire.token_type.lower()
    if kind != "bearer" and not (kind == "dpop" and dpop is not None):
        raise TokenError(f"the token endpoint {endpoint} issued a {printable(wire.token_type, 30)!r} token, not Bearer")
    now = time.time()
    return TokenSet(
        access_token=Secret(wire.access_token),
        # RFC 6749 §6: a refresh response may omit refresh_token, meaning the old one stays valid.
        refresh_token=Secret(wire.refresh_token) if wire.refresh_token else previous_refresh,
        token_type="DPoP" if kind == "dpop" else "Bearer",
        expires_at=now + wire.expires_in if wire.expires_in is not None else None,
        scope=wire.scope,
        issued_at=now,
    )


async def exchange_code(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    *,
    code: str,
    redirect_uri: str,
    code_verifier: str,
    resource: str,
    dpop: DpopKey | None = None,
) -> TokenSet:
    """Exchange an authorization code (PKCE verifier, RFC 8707 resource). Raises `TokenError`/`InvalidGrant`."""
    body = prepare_token_request(
        "authorization_code", code=code, redirect_uri=redirect_uri, code_verifier=code_verifier, resource=resource
    )
    response = await token_post(http, token_endpoint, client, body, dpop=dpop)
    return parse_token_response(response, token_endpoint, None, dpop=dpop)


async def refresh_tokens(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    tokens: TokenSet,
    *,
    resource: str,
    dpop: DpopKey | None = None,
) -> TokenSet:
    """Spend `tokens.refresh_token` for new tokens; the scope is kept. Raises `TokenError`/`InvalidGrant`."""
    if tokens.refresh_token is None:
        raise InvalidGrant("there is no refresh token to spend")
    body = prepare_token_request(
        "refresh_token", refresh_token=tokens.refresh_token.reveal(), resource=resource or None
    )
    response = await token_post(http, token_endpoint, client, body, dpop=dpop)
    fresh = parse_token_response(response, token_endpoint, tokens.refresh_token, dpop=dpop)
    return fresh if fresh.scope else replace(fresh, scope=tokens.scope)


async def client_credentials_token(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    *,
    scope: str | None,
    resource: str,
    dpop: DpopKey | None = None,
) -> TokenSet:
    """RFC 6749 §4.4: a token for the client itself (no user, no refresh token). Raises `TokenError`."""
    body = prepare_token_request("client_credentials", scope=scope, resource=resource or None)
    response = await token_post(http, token_endpoint, client, body, dpop=dpop)
    return parse_token_response(response, token_endpoint, None, dpop=dpop)


async def revoke(http: httpx2.AsyncClient, endpoint: str, client: ClientRegistration, tokens: TokenSet) -> int:
    """RFC 7009: revoke the refresh token, then the access token; returns how many the server accepted.

    Raises `TokenError` when the endpoint cannot be reached, or refuses the refresh token (a server
    that answers an error for it has not revoked the grant, so the caller must not say it did).
    """
    accepted = 0
    pairs = [("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)]
    for hint, token in pairs:
        if token is None:
            continue
        body, _ = prepare_revoke_token_request(token.reveal(), hint)
        response = await token_post(http, endpoint, client, body)
        if response.status_code == 200:
            accepted += 1
        elif hint == "refresh_token":
            raise TokenError(f"the revocation endpoint {endpoint} answered HTTP {response.status_code}")
    return accepted
