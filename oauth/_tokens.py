"""Token endpoint requests: code exchange, refresh (RFC 6749 §4.1.3, §6) and revocation (RFC 7009).

authlib builds the bodies (`prepare_token_request`) and the client authentication (`ClientAuth`:
`none`, `client_secret_basic`, `client_secret_post`); this module sends them over our `httpx2`
client and turns every answer into a `TokenSet` or one `TokenError` sentence.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import httpx2
import pydantic
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request

from ._exceptions import InvalidGrant, TokenError
from ._grant import ClientRegistration, TokenSet
from ._secret import Secret

__all__ = ["exchange_code", "refresh_tokens", "revoke"]

_FORM = "application/x-www-form-urlencoded"


class _TokenWire(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    access_token: str = pydantic.Field(min_length=1)
    token_type: str
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


def _short(text: object, limit: int = 200) -> str:
    value = str(text)
    return value if len(value) <= limit else value[:limit] + "..."


async def _post(http: httpx2.AsyncClient, endpoint: str, client: ClientRegistration, body: str) -> httpx2.Response:
    secret = client.client_secret.reveal() if client.client_secret else None
    auth = ClientAuth(client.client_id, secret, client.token_endpoint_auth_method)
    headers: dict[str, str] = {"Content-Type": _FORM, "Accept": "application/json"}
    _, headers, body = auth.prepare("POST", endpoint, headers, body)
    try:
        return await http.post(endpoint, content=body.encode(), headers=headers)
    except httpx2.HTTPError as exc:
        raise TokenError(f"cannot reach the token endpoint {endpoint} ({type(exc).__name__})") from None


def _parse(response: httpx2.Response, endpoint: str, previous_refresh: Secret | None) -> TokenSet:
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
        detail = f" ({_short(description)})" if isinstance(description, str) and description else ""
        cls = InvalidGrant if code == "invalid_grant" else TokenError
        raise cls(f"the token endpoint {endpoint} refused the request: {_short(code, 60)}{detail}")
    try:
        wire = _TokenWire.model_validate(data)
    except pydantic.ValidationError:
        raise TokenError(
            f"the token endpoint {endpoint} answered HTTP 200 with something that is not an OAuth token response"
        ) from None
    if wire.token_type.lower() != "bearer":
        raise TokenError(f"the token endpoint {endpoint} issued a {_short(wire.token_type, 30)!r} token, not Bearer")
    now = time.time()
    return TokenSet(
        access_token=Secret(wire.access_token),
        # RFC 6749 §6: a refresh response may omit refresh_token, meaning the old one stays valid.
        refresh_token=Secret(wire.refresh_token) if wire.refresh_token else previous_refresh,
        token_type="Bearer",
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
) -> TokenSet:
    """Exchange an authorization code (PKCE verifier, RFC 8707 resource). Raises `TokenError`/`InvalidGrant`."""
    body = prepare_token_request(
        "authorization_code", code=code, redirect_uri=redirect_uri, code_verifier=code_verifier, resource=resource
    )
    response = await _post(http, token_endpoint, client, body)
    return _parse(response, token_endpoint, None)


async def refresh_tokens(
    http: httpx2.AsyncClient, token_endpoint: str, client: ClientRegistration, tokens: TokenSet, *, resource: str
) -> TokenSet:
    """Spend `tokens.refresh_token` for new tokens; the scope is kept. Raises `TokenError`/`InvalidGrant`."""
    if tokens.refresh_token is None:
        raise InvalidGrant("there is no refresh token to spend")
    body = prepare_token_request(
        "refresh_token", refresh_token=tokens.refresh_token.reveal(), resource=resource or None
    )
    response = await _post(http, token_endpoint, client, body)
    fresh = _parse(response, token_endpoint, tokens.refresh_token)
    return fresh if fresh.scope else replace(fresh, scope=tokens.scope)


async def revoke(http: httpx2.AsyncClient, endpoint: str, client: ClientRegistration, tokens: TokenSet) -> int:
    """RFC 7009: revoke the refresh token, then the access token; returns how many the server accepted."""
    accepted = 0
    pairs = [("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)]
    for hint, token in pairs:
        if token is None:
            continue
        body = prepare_token_request("unused", token=token.reveal(), token_type_hint=hint)
        body = "&".join(part for part in body.split("&") if not part.startswith("grant_type="))
        response = await _post(http, endpoint, client, body)
        accepted += response.status_code == 200
    return accepted
