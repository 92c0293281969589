"""RFC 9449 DPoP on the client side: a key per grant, a proof per request, and the server's nonces.

Where an upstream's authorization server advertises `dpop_signing_alg_values_supported` with ES256,
a new grant gets a key of its own (`DpopKey.generate`, P-256), kept in the grant record beside the
tokens (the private JWK as a `Secret`, written by the same stores under the same 0600 and lock
rules, never in a log or `repr`). Every token request for that grant and every request to the
resource carry a proof (`proof`): `htm`, `htu` (the URL without query and fragment, §4.2), `iat`, a
random `jti`, `ath` (the access token's SHA-256, §4.2) on resource requests, and the server's latest
`nonce` for that origin.

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
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

import httpx2
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey

from .._exceptions import AuthorizationServerUnreachable, DpopNonceLoop, StoreCorrupt
from .._shared import Secret

__all__ = ["DPOP_ALG", "DpopKey", "bound_key", "dpop_post", "new_key", "nonce_demanded", "supports_dpop"]

DPOP_ALG = "ES256"
"""The one algorithm this client signs proofs with (P-256: every DPoP server supports it in practice)."""


def supports_dpop(algorithms: Iterable[str] | None) -> bool:
    """Whether an authorization server's `dpop_signing_alg_values_supported` lets this client bind tokens."""
    return algorithms is not None and DPOP_ALG in algorithms


def new_key(algorithms: Iterable[str] | None) -> DpopKey | None:
    """A fresh key for a new grant when the server binds tokens (`supports_dpop`), else None."""
    return DpopKey.generate() if supports_dpop(algorithms) else None


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
