"""The gateway as an OAuth protected resource, under test: oidc-provider issuing its tokens, a gateway
trusting it, and the ways a peer gets a token (tests/oauth/oidc_provider.mjs has the clients).

- `service_token`: the client credentials grant of a static client (`jwt-service`: a JWT;
  `opaque-service`: an opaque token), for a resource, optionally DPoP-bound to a key;
- `person_token`: a person signing in: RFC 7591 registration, PKCE with `resource`, oidc-provider's
  login and consent pages posted as a browser would (`tests.oauth.helpers.authorize`);
- `mint`: a token signed with the issuer's own key (read from its key file) or another, for the
  claims the provider will not put in one (expired, not yet valid, another issuer).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from tests.conftest import free_port
from tests.oauth.helpers import authorize
from tests.oauth.peers import AuthServer, oidc_provider
from tests.processes import running

from .conftest import Served, make_project, serve

BOTH_ERAS = Path(__file__).resolve().parent.parent / "fixtures" / "upstreams" / "both_eras.py"
INTROSPECTOR = {
    "AGENT_SDK_OAUTH_CLIENT_ID": "gateway-introspector",
    "AGENT_SDK_OAUTH_CLIENT_SECRET": "introspector-secret-0123456789",
}
SECRETS = {"jwt-service": "jwt-secret-0123456789", "opaque-service": "opaque-secret-0123456789"}
REDIRECT = "http://127.0.0.1:1/callback"
WHOAMI = Path(__file__).resolve().parent / "projects" / "oauth" / "agent" / "tools" / "whoami.py"


@dataclass(frozen=True)
class Issuer:
    """A running oidc-provider and its signing key (private: the tests mint tokens as the issuer)."""

    server: AuthServer
    key: RSAKey

    @property
    def url(self) -> str:
        return self.server.issuer


@contextmanager
def issuer(folder: Path) -> Iterator[Issuer]:
    folder.mkdir(parents=True, exist_ok=True)
    key_file = folder / "issuer-key.json"
    with oidc_provider(3600, key_file=key_file) as server:
        yield Issuer(server, RSAKey.import_key(json.loads(key_file.read_text())))


@contextmanager
def oauth_gateway(folder: Path, issuer_url: str, *flags: str, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    """`agent-sdk serve --oauth-issuer` before an `mcp` 2.x upstream (tool `echo`), introspecting as
    `gateway-introspector`."""
    port = free_port()
    with running([sys.executable, str(BOTH_ERAS), "--port", str(port)], port=port):
        definition = (
            "from connections import define_connection\n\n"
            f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', advertise_tools=True)\n"
        )
        project = make_project(folder / "project", {"eras": definition})
        shutil.copy(WHOAMI, project / "agent" / "tools" / "whoami.py")
        served = serve(
            project, folder / "state", "--oauth-issuer", issuer_url, *flags, env={**INTROSPECTOR, **(env or {})}
        )
        try:
            yield served
        finally:
            served.stop()


def mint(key: Any, claims: Mapping[str, Any], *, alg: str = "RS256", kid: str | None = "test-rs256") -> str:
    header: dict[str, Any] = {"alg": alg, "typ": "at+jwt"}
    if kid is not None:
        header["kid"] = kid
    return jwt.encode(header, dict(claims), key)


def claims_for(issuer_url: str, audience: str, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {"iss": issuer_url, "sub": "minted-person", "aud": audience, "iat": now, "exp": now + 600}
    base.update({"scope": "mcp:tools", "client_id": "minted", "jti": uuid.uuid4().hex})
    return {**base, **extra}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def dpop_proof(
    key: ECKey,
    method: str,
    url: str,
    token: str | None = None,
    *,
    jti: str | None = None,
    iat: int | None = None,
    nonce: str | None = None,
) -> str:
    """An RFC 9449 proof signed by `key` for `method` `url` (and `token`'s `ath`, and a server's `nonce`)."""
    claims: dict[str, Any] = {"htm": method, "htu": url, "iat": iat or int(time.time()), "jti": jti or uuid.uuid4().hex}
    if nonce is not None:
        claims["nonce"] = nonce
    if token is not None:
        claims["ath"] = _b64(hashlib.sha256(token.encode()).digest())
    header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": key.as_dict(private=False)}
    return jwt.encode(header, claims, key)


def service_token(
    issuer_url: str, resource: str, *, client: str = "jwt-service", scope: str = "mcp:tools", dpop: ECKey | None = None
) -> str:
    """An access token from the client credentials grant of `client`, for `resource`."""
    headers = {"DPoP": dpop_proof(dpop, "POST", f"{issuer_url}/token")} if dpop is not None else {}
    answer = httpx2.post(
        f"{issuer_url}/token",
        data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
        auth=(client, SECRETS[client]),
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]


def revoke(issuer_url: str, token: str, *, client: str = "opaque-service") -> None:
    answer = httpx2.post(f"{issuer_url}/token/revocation", data={"token": token}, auth=(client, SECRETS[client]))
    assert answer.status_code == 200, answer.text


def person_token(
    issuer_url: str, resource: str, login: str, *, scope: str = "mcp:tools", client_name: str | None = None
) -> str:
    """A person's access token: registration (a new client, named `client_name` if given), PKCE with
    `resource`, the login and consent pages."""
    metadata = {
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code"],
        "response_types": ["code"],
    }
    if client_name is not None:
        metadata["client_name"] = client_name
    registered = httpx2.post(f"{issuer_url}/reg", json=metadata)
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    query = {
        "client_id": client_id,
        "response_type": "code",
        "redirect_uri": REDIRECT,
        "scope": scope,
        "resource": resource,
        "state": secrets.token_urlsafe(8),
        "code_challenge": _b64(hashlib.sha256(verifier.encode()).digest()),
        "code_challenge_method": "S256",
    }
    back = authorize(f"{issuer_url}/auth?{urlencode(query)}", REDIRECT, login=login)
    code = parse_qs(urlsplit(back).query)["code"][0]
    answer = httpx2.post(
        f"{issuer_url}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]
