"""The token requests of a caller's own credential: RFC 8693 token exchange and the ID-JAG grant.

- `exchange_token`: the caller's access token (`subject_token`) for one whose audience is the
  upstream (`resource`, RFC 8707, and an optional RFC 8693 `audience`), at the caller's identity
  provider, the gateway authenticating as its own client (and, optionally, with an `actor_token`).
- `request_id_jag` + `redeem_id_jag` (draft-ietf-oauth-identity-assertion-authz-grant): the same
  exchange asks for `requested_token_type=urn:ietf:params:oauth:token-type:id-jag` with `audience`
  = the upstream's authorization server; that server redeems it with the RFC 7523 JWT bearer grant.

authlib builds the bodies (`prepare_token_request`, any grant type) and the client authentication
(`_tokens._post`); the answers become a `TokenSet` there. authlib has the ID-JAG grant for servers
only (`authlib.oauth2.drafts.id_jag`), so the client's check of an issued ID-JAG is ours: its
`typ`, `aud`, `exp` and `client_id`, read with joserfc without verifying the signature (the gateway
is not its audience; the upstream's authorization server verifies it against the IdP's keys). The
check exists so that an assertion the IdP made for another server never reaches this one.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import httpx2
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from joserfc import jws
from joserfc.errors import JoseError

from .._exceptions import AssertionRefused
from .._grant import ClientRegistration, TokenSet
from .._shared import Secret, printable
from ._dpop import DpopKey
from ._tokens import parse_token_response, token_post

__all__ = ["ACCESS_TOKEN_TYPE", "ID_JAG_TYPE", "exchange_token", "redeem_id_jag", "request_id_jag"]

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def _exchange_body(
    subject_token: Secret,
    *,
    requested: str,
    resource: str,
    audience: str | None,
    scope: str | None,
    actor_token: Secret | None,
) -> str:
    fields: dict[str, str] = {
        "subject_token": subject_token.reveal(),
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "requested_token_type": requested,
        "resource": resource,
    }
    if audience:
        fields["audience"] = audience
    if scope:
        fields["scope"] = scope
    if actor_token is not None:
        fields["actor_token"] = actor_token.reveal()
        fields["actor_token_type"] = ACCESS_TOKEN_TYPE
    return prepare_token_request(TOKEN_EXCHANGE, **fields)


async def exchange_token(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    subject_token: Secret,
    *,
    resource: str,
    audience: str | None = None,
    scope: str | None = None,
    actor_token: Secret | None = None,
) -> TokenSet:
    """RFC 8693: `subject_token` for an access token for `resource`. Raises `InvalidGrant` (the IdP refused the
    subject token), `InvalidTarget` (it issues nothing for that resource), `TokenError`."""
    body = _exchange_body(
        subject_token,
        requested=ACCESS_TOKEN_TYPE,
        resource=resource,
        audience=audience,
        scope=scope,
        actor_token=actor_token,
    )
    response = await token_post(http, token_endpoint, client, body)
    return parse_token_response(response, token_endpoint, None)


async def request_id_jag(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    subject_token: Secret,
    *,
    authorization_server: str,
    resource: str,
    scope: str | None = None,
    actor_token: Secret | None = None,
) -> Secret:
    """An ID-JAG for `authorization_server` (its issuer) and `resource`, checked (`check_id_jag`). Raises
    `InvalidGrant`, `InvalidTarget`, `AssertionRefused`, `TokenError`."""
    body = _exchange_body(
        subject_token,
        requested=ID_JAG_TYPE,
        resource=resource,
        audience=authorization_server,
        scope=scope,
        actor_token=actor_token,
    )
    response = await token_post(http, token_endpoint, client, body)
    if response.status_code != 200:
        parse_token_response(response, token_endpoint, None)  # raises the server's error as its class
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("issued_token_type") != ID_JAG_TYPE:
        raise AssertionRefused(
            f"the identity provider's token endpoint {token_endpoint} answered with something that is not an ID-JAG "
            "(issued_token_type is not urn:ietf:params:oauth:token-type:id-jag)"
        )
    assertion = data.get("access_token")
    if not isinstance(assertion, str) or not assertion:
        raise AssertionRefused(f"the identity provider's token endpoint {token_endpoint} issued an empty ID-JAG")
    check_id_jag(assertion, authorization_server)
    return Secret(assertion)


def check_id_jag(assertion: str, authorization_server: str) -> None:
    """Refuse (`AssertionRefused`) an ID-JAG whose `typ`, `aud` or `exp` say it is not for `authorization_server`
    now. The signature is the audience's to check."""
    try:
        compact = jws.extract_compact(assertion.encode())
        claims = json.loads(compact.payload)
    except (JoseError, ValueError, UnicodeDecodeError):
        raise AssertionRefused("the identity provider issued an ID-JAG that is not a JWT") from None
    typ = compact.protected.get("typ")
    if not isinstance(claims, dict) or typ != "oauth-id-jag+jwt":
        raise AssertionRefused(f"the identity provider issued a JWT of type {printable(str(typ), 40)!r}, not an ID-JAG")
    audience = claims.get("aud")
    audiences: list[object] = audience if isinstance(audience, list) else [audience]
    if authorization_server not in audiences:
        shown = ", ".join(printable(str(a), 100) for a in audiences)
        raise AssertionRefused(
            f"the identity provider issued an ID-JAG for {shown}, not for the upstream's authorization server "
            f"{authorization_server}; it was not sent there (check the IdP's audience mapping for this client)"
        )
    expires = claims.get("exp")
    if not isinstance(expires, int | float) or expires <= time.time():
        raise AssertionRefused("the identity provider issued an ID-JAG that has already expired (or names no exp)")


async def redeem_id_jag(
    http: httpx2.AsyncClient,
    token_endpoint: str,
    client: ClientRegistration,
    assertion: Secret,
    *,
    scope: str | None = None,
    dpop: DpopKey | None = None,
) -> TokenSet:
    """RFC 7523 §2.1 at the upstream's authorization server: the ID-JAG for an access token (DPoP-bound with
    `dpop`). Raises `InvalidGrant` (the server refused the assertion), `InvalidClient`, `TokenError`."""
    body = prepare_token_request(JWT_BEARER, assertion=assertion.reveal(), scope=scope or None)
    response = await token_post(http, token_endpoint, client, body, dpop=dpop)
    # No refresh token is kept: the next token comes from a new ID-JAG, while the caller's own token is valid.
    return replace(parse_token_response(response, token_endpoint, None, dpop=dpop), refresh_token=None)
