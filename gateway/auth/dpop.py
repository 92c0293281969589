"""DPoP proofs (RFC 9449) for access tokens bound to a key (`cnf.jkt`).

A bound token is admitted only with a `DPoP` header holding one proof JWS (§4.3), checked by
joserfc against the public key in its own header: `typ` `dpop+jwt`, an asymmetric `alg`, a public
`jwk` whose RFC 7638 thumbprint is the token's `cnf.jkt`; claims `htm` (the request's method),
`htu` (the request's URL at the gateway's public URL, without query or fragment: behind a proxy the
socket's URL is not what the client signed), `iat` within `window` seconds (plus the clock
leeway), `ath` (the token's SHA-256, §4.2), and a `jti` not seen before within the window. The
seen `jti`s live in memory, or in Redis with `--state-url` (`SET NX EX`), so a proof replayed to
another replica is refused too.

Resource-server nonces (§9) are an opt-in (`serve --dpop-nonce`, `DpopNonces`): a proof must then carry a
`nonce` this deployment made, or it is 401 `use_dpop_nonce` with the current one in `DPoP-Nonce`. A nonce
is an HMAC of a time step under a key derived from the deployment's state key (`state/state_key.py`), so
every replica makes and accepts the same ones without sharing any state; it rotates every `period`
seconds, and the previous step's nonce is still taken, with a fresh one in the answer's `DPoP-Nonce`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any, Protocol

import cachetools
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry
from starlette.types import Scope

from ..errors import StateUnavailable
from ..http._asgi import header_values
from ..state.state_key import derive_key
from .jwt_limits import jwt_too_large
from .oauth_tokens import ALGORITHMS, TokenRefused

__all__ = ["DpopChecker", "DpopNonces", "MemoryJtis", "RedisJtis", "SeenJtis"]


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


class DpopNonces:
    """The nonces of RFC 9449 §9 this deployment requires: `<step in hex>.<HMAC-SHA256 of the step, 128 bits>`.

    `key` is the deployment's state key (the same on every replica); the MAC key is derived from it under a
    label of its own, so a nonce reveals nothing of the key that seals session ids. A step lasts `period`
    seconds; a nonce of this step or the one before is valid (so one lives `period` to 2 x `period`)."""

    def __init__(self, key: bytes, *, period: int = 300) -> None:
        self._key = derive_key(key, "dpop-nonce")
        self.period = period

    def _make(self, step: int) -> str:
        mac = hmac.new(self._key, step.to_bytes(8, "big"), hashlib.sha256).digest()[:16]
        return f"{step:x}.{_b64(mac)}"

    def current(self, now: float | None = None) -> str:
        """The nonce to hand a client now (`DPoP-Nonce`)."""
        return self._make(int((time.time() if now is None else now) // self.period))

    def accepts(self, nonce: object, now: float | None = None) -> bool:
        """Whether `nonce` (a proof's claim) is one of this step's or the previous step's."""
        if not isinstance(nonce, str) or len(nonce) > 64 or not nonce.isascii():
            return False
        step = int((time.time() if now is None else now) // self.period)
        return any(hmac.compare_digest(nonce, self._make(s)) for s in (step, step - 1))


class DpopChecker:
    """Checks the proof of a request carrying a DPoP-bound token (and its nonce, with `nonces`)."""

    def __init__(
        self,
        public_url: str,
        seen: SeenJtis,
        *,
        window: int = 60,
        leeway: int = 5,
        nonces: DpopNonces | None = None,
    ) -> None:
        self.public_url = public_url.rstrip("/")
        self.seen = seen
        self.window = window
        self.leeway = leeway
        self.nonces = nonces

    async def check(self, scope: Scope, token: str, jkt: str) -> str | None:
        """Raises `TokenRefused` (401 `invalid_dpop_proof` or `use_dpop_nonce`, or 503 when replays cannot be
        checked). Returns a newer nonce to send back in `DPoP-Nonce` when the proof's is the previous step's."""
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
        newer = None
        if self.nonces is not None:
            nonce = claims.get("nonce")
            if not self.nonces.accepts(nonce):
                said = "needs a" if nonce is None else "has an expired or unknown"
                raise TokenRefused(
                    401, "use_dpop_nonce", f"the DPoP proof {said} nonce: sign a new proof with the DPoP-Nonce given"
                )
            current = self.nonces.current()
            newer = current if nonce != current else None
        try:
            fresh = await self.seen.first_use(jti, self.window + 2 * self.leeway)
        except StateUnavailable as exc:
            raise TokenRefused(503, "temporarily_unavailable", str(exc)) from None
        if not fresh:
            raise _invalid("the DPoP proof was used before; make a new one for each request")
        return newer

    @staticmethod
    def _verified(proof: str, jkt: str) -> dict[str, Any]:
        too_large = jwt_too_large(proof, "the DPoP proof")
        if too_large is not None:
            raise _invalid(too_large)
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
