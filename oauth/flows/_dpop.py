"""RFC 9449 DPoP on the client side: a key per grant, a proof per request, and the server's nonces.

Where the upstream asks for DPoP (`binding`: the connection's `dpop=True`, the resource's RFC 9728
`dpop_bound_access_tokens_required`, or a `DPoP` challenge in its 401), a new grant gets a key of its
own (`DpopKey.generate`, P-256), kept in the grant record beside the tokens (the private JWK as a
`Secret`, written by the same stores under the same 0600 and lock rules, never in a log or `repr`).
Every token request for that grant and every request to the resource carry a proof (`proof`): `htm`,
`htu` (the URL without query and fragment, §4.2), `iat`, a random `jti`, `ath` (the access token's
SHA-256, §4.2) on resource requests, and the server's latest `nonce` for that origin.

A server that answers `use_dpop_nonce` (a 400 at the token endpoint, a 401 `WWW-Authenticate: DPoP
error="use_dpop_nonce"` at the resource, §8 and §9) with a `DPoP-Nonce` gets one retry with that
nonce; a second demand right after is a loop and is refused with `DpopNonceLoop`, never retried on.

joserfc generates the key, computes its RFC 7638 thumbprint and signs the proof JWT; the claims, the
nonce memory and the retry rule are ours (authlib has no DPoP client).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

import httpx2
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey

from .._exceptions import AuthorizationServerUnreachable, DpopNonceLoop, StoreCorrupt
from .._grant import ClientRegistration, StoreKey
from .._shared import Secret
from ..discovery._discovery import Challenge, ResourceMetadata

__all__ = ["DPOP_ALG", "Binding", "DpopKey", "binding", "bound_key", "dpop_post", "new_key", "nonce_demanded"]

DPOP_ALG = "ES256"
"""The one algorithm this client signs proofs with (P-256: every DPoP server supports it in practice)."""


Binding = Literal["off", "asked", "required"]
"""Whether a new grant's tokens are DPoP-bound (`binding`): `off` (Bearer), `asked` (a key is offered; a server
that answers Bearer gets a Bearer grant), `required` (a Bearer answer is refused)."""


def binding(
    choice: bool | None, challenge: Challenge | None, prm: ResourceMetadata | None, client: ClientRegistration | None
) -> Binding:
    """DPoP only where the upstream asks for it (docs/oauth.md, "DPoP-bound grants"): the connection's `dpop=`
    when set (True: required, False: off); else `required` when the resource's RFC 9728 metadata says
    `dpop_bound_access_tokens_required`, its 401 challenges DPoP and not Bearer, or the authorization server
    registered the `client` with `dpop_bound_access_tokens` (it refuses it a token without a proof); `asked`
    when the 401 challenges both, `off` otherwise: an authorization server that merely supports DPoP binds
    nothing, since a resource that takes Bearer only (the `mcp` SDK's own auth) refuses a bound token."""
    if choice is not None:
        return "required" if choice else "off"
    if client is not None and client.dpop_bound:
        return "required"
    if prm is not None and prm.dpop_bound_access_tokens_required:
        return "required"
    if challenge is not None and challenge.dpop:
        return "asked" if challenge.bearer else "required"
    return "off"


def binding_refusal(key: StoreKey, choice: bool | None, bound: bool, challenge: Challenge | None) -> str | None:
    """Why a resource's 401 is about the token's binding (a sentence naming the fix), or None when it is not:
    a `bound` token where the challenge names Bearer only, or a Bearer token where it names DPoP only."""
    if challenge is None:
        return None
    where, name = key.resource, key.connection
    if bound and not challenge.dpop:
        said = f"connection {name!r}: {where} refused the DPoP-bound token (RFC 9449): its 401 challenges Bearer only"
        if choice:
            return f"{said}, so it does not take DPoP; remove dpop=True from the connection's definition"
        again = "sign in again" if key.principal else f"log in again with `agent-sdk mcp oauth {name}`"
        return f"{said}; {again}: the new grant is Bearer (or set dpop=False)"
    if not bound and challenge.dpop and not challenge.bearer:
        said = f"connection {name!r}: {where} takes DPoP-bound tokens only (RFC 9449: its 401 challenges DPoP)"
        if choice is False:
            return f"{said}, and the connection sets dpop=False; remove dpop=False from its definition"
        again = "sign in again" if key.principal else f"log in again with `agent-sdk mcp oauth {name}`"
        return f"{said}, and this grant is Bearer; {again}: the new grant is bound"
    return None


def new_key(bind: Binding) -> DpopKey | None:
    """A fresh key (P-256) for a new grant unless `bind` is `off`."""
    return None if bind == "off" else DpopKey.generate()


def bound_key(token_type: str, key: DpopKey | None) -> Secret | None:
    """What a grant keeps of `key`: the key when the server did bind the token (`token_type` DPoP), else nothing."""
    return key.to_secret() if key is not None and token_type == "DPoP" else None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _htu(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class DpopKey:
    """One grant's DPoP key pair and the nonces servers gave it (by origin)."""

    __slots__ = ("_key", "_nonces", "thumbprint")

    def __init__(self, key: ECKey) -> None:
        self._key = key
        self._nonces: dict[str, str] = {}
        self.thumbprint: str = key.thumbprint()
        """RFC 7638 thumbprint: a token bound to this key carries it as `cnf.jkt`."""

    @classmethod
    def generate(cls) -> DpopKey:
        return cls(ECKey.generate_key("P-256"))

    @classmethod
    def from_secret(cls, value: Secret, where: str) -> DpopKey:
        """The key kept in a grant record; raises `StoreCorrupt` naming `where` for anything else."""
        try:
            data = json.loads(value.reveal())
            key = ECKey.import_key(data)
            if not key.is_private or data.get("crv") != "P-256":
                raise ValueError("not a private P-256 key")
        except (ValueError, TypeError, JoseError):
            raise StoreCorrupt(
                f"the DPoP key in {where} is not valid; "
                "delete the record and log in again with `agent-sdk mcp oauth NAME`"
            ) from None
        return cls(key)

    def to_secret(self) -> Secret:
        """The private JWK, as the stores keep it."""
        return Secret(json.dumps(self._key.as_dict(private=True), sort_keys=True))

    def __repr__(self) -> str:
        return "DpopKey(***)"

    def remember(self, url: str, response: httpx2.Response) -> bool:
        """Keep the `DPoP-Nonce` a server sent (§8.2: any answer may carry one); True when there was one."""
        nonce = response.headers.get("dpop-nonce")
        if not nonce:
            return False
        self._nonces[_origin(url)] = nonce
        return True

    def proof(self, method: str, url: str, *, access_token: Secret | None = None) -> str:
        """A DPoP proof JWT for one request (§4.2)."""
        claims: dict[str, object] = {
            "jti": secrets.token_urlsafe(18),
            "htm": method.upper(),
            "htu": _htu(url),
            "iat": int(time.time()),
        }
        nonce = self._nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.reveal().encode()).digest())
        header = {"typ": "dpop+jwt", "alg": DPOP_ALG, "jwk": self._key.as_dict(private=False)}
        return jwt.encode(header, claims, self._key)


def nonce_demanded(response: httpx2.Response) -> bool:
    """Whether `response` is a `use_dpop_nonce` demand: a token endpoint's 400 (§8) or a resource's 401 (§9)."""
    if response.status_code == 401:
        challenge = response.headers.get("www-authenticate", "")
        return challenge[:5].lower() == "dpop " and 'error="use_dpop_nonce"' in challenge
    if response.status_code != 400:
        return False
    try:
        data = json.loads(response.content)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("error") == "use_dpop_nonce"


async def dpop_post(
    http: httpx2.AsyncClient, endpoint: str, content: bytes, headers: dict[str, str], key: DpopKey
) -> httpx2.Response:
    """POST to a token endpoint with a proof; one retry when it demands a nonce, `DpopNonceLoop` on a second."""
    for attempt in range(2):
        try:
            response = await http.post(
                endpoint, content=content, headers={**headers, "DPoP": key.proof("POST", endpoint)}
            )
        except httpx2.HTTPError as exc:
            raise AuthorizationServerUnreachable(f"cannot reach {endpoint} ({type(exc).__name__})") from None
        fresh = key.remember(endpoint, response)
        if not nonce_demanded(response):
            return response
        if attempt == 1 or not fresh:
            break
    raise DpopNonceLoop(
        f"the token endpoint {endpoint} demanded a new DPoP nonce again right after one was sent "
        "(use_dpop_nonce twice in a row); the request was given up rather than repeated"
    )
