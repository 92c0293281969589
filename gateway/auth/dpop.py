"""DPoP proofs (RFC 9449) for access tokens bound to a key (`cnf.jkt`).

A bound token is admitted only with a `DPoP` header holding one proof JWS (§4.3), checked by
joserfc against the public key in its own header: `typ` `dpop+jwt`, an asymmetric `alg`, a public
`jwk` whose RFC 7638 thumbprint is the token's `cnf.jkt`; claims `htm` (the request's method),
`htu` (the request's URL at the gateway's public URL, without query or fragment: behind a proxy the
socket's URL is not what the client signed), `iat` within `window` seconds (plus the clock
leeway), `ath` (the token's SHA-256, §4.2), and a `jti` not seen before within the window. The
seen `jti`s live in memory, or in Redis with `--state-url` (`SET NX EX`), so a proof replayed to
another replica is refused too. Server nonces (§8) are not required.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any, Protocol

import cachetools
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry
from starlette.types import Scope

from ..errors import StateUnavailable
from ..http._asgi import header_values
from .oauth_tokens import ALGORITHMS, TokenRefused

__all__ = ["DpopChecker", "MemoryJtis", "RedisJtis", "SeenJtis"]


class SeenJtis(Protocol):
    """Where proof ids are remembered for `ttl` seconds: `first_use` is True only the first time."""

    async def first_use(self, jti: str, ttl: int) -> bool: ...


class MemoryJtis:
    """One process's proof ids (bounded; an id that fell out is older than any live window)."""

    def __init__(self, maxsize: int = 100_000, window: float = 300.0) -> None:
        self._seen: cachetools.TTLCache[str, bool] = cachetools.TTLCache(maxsize=maxsize, ttl=window)

    async def first_use(self, jti: str, ttl: int) -> bool:
        if jti in self._seen:
            return False
        self._seen[jti] = True
        return True


class RedisJtis:
    """Proof ids shared by every replica: `SET key 1 NX EX ttl` answers whether this is the first use."""

    def __init__(self, client: Any, prefix: str = "agent-sdk:dpop:") -> None:
        self._client = client
        self._prefix = prefix

    async def first_use(self, jti: str, ttl: int) -> bool:
        key = self._prefix + hashlib.sha256(jti.encode()).hexdigest()
        try:
            return bool(await self._client.set(key, "1", nx=True, ex=ttl))
        except Exception as exc:  # redis errors: fail closed, the proof cannot be known fresh
            raise StateUnavailable(f"the DPoP replay store is unreachable ({type(exc).__name__})") from None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _invalid(description: str) -> TokenRefused:
    return TokenRefused(401, "invalid_dpop_proof", description)


class DpopChecker:
    """Checks the proof of a request carrying a DPoP-bound token."""

    def __init__(self, public_url: str, seen: SeenJtis, *, window: int = 60, leeway: int = 5) -> None:
        self.public_url = public_url.rstrip("/")
        self.seen = seen
        self.window = window
        self.leeway = leeway

    async def check(self, scope: Scope, token: str, jkt: str) -> None:
        """Raises `TokenRefused` (401 `invalid_dpop_proof`, or 503 when replays cannot be checked)."""
        proofs = header_values(scope, b"dpop")
        if len(proofs) != 1:
            raise _invalid("send exactly one DPoP header with a proof for this request (RFC 9449 §4.3)")
        claims = self._verified(proofs[0], jkt)
        if claims.get("htm") != scope.get("method"):
            raise _invalid("the DPoP proof is for another HTTP method")
        if claims.get("htu") != self.public_url + scope.get("path", ""):
            raise _invalid("the DPoP proof is for another URL")
        iat = claims.get("iat")
        now = time.time()
        if not isinstance(iat, int | float) or not now - self.window - self.leeway <= iat <= now + self.leeway:
            raise _invalid("the DPoP proof is too old or from the future; make a new one")
        if claims.get("ath") != _b64(hashlib.sha256(token.encode()).digest()):
            raise _invalid("the DPoP proof is for another access token (ath)")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not 8 <= len(jti) <= 256:
            raise _invalid("the DPoP proof has no usable jti")
        try:
            fresh = await self.seen.first_use(jti, self.window + 2 * self.leeway)
        except StateUnavailable as exc:
            raise TokenRefused(503, "temporarily_unavailable", str(exc)) from None
        if not fresh:
            raise _invalid("the DPoP proof was used before; make a new one for each request")

    @staticmethod
    def _verified(proof: str, jkt: str) -> dict[str, Any]:
        try:
            signed = jws.extract_compact(proof.encode())
        except (JoseError, ValueError, UnicodeError):
            raise _invalid("the DPoP header is not a JWS") from None
        head: dict[str, Any] = signed.headers()
        alg, raw_key = head.get("alg"), head.get("jwk")
        if head.get("typ") != "dpop+jwt" or alg not in ALGORITHMS or not isinstance(raw_key, dict):
            raise _invalid("the DPoP proof needs typ dpop+jwt, an asymmetric alg and a jwk header")
        if "d" in raw_key or raw_key.get("kty") == "oct":
            raise _invalid("the DPoP proof's jwk must be a public key")
        try:
            key = JWKRegistry.import_key(raw_key)
            if key.thumbprint() != jkt:
                raise _invalid("the DPoP proof is signed by another key than the token is bound to")
            claims = jwt.decode(proof, key, algorithms=[alg]).claims
        except TokenRefused:
            raise
        except (JoseError, ValueError, TypeError):
            raise _invalid("the DPoP proof's signature does not verify") from None
        if not isinstance(claims, dict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise _invalid("the DPoP proof's payload is not a JSON object")
        return claims
