"""Checking an OAuth access token presented to the gateway (MCP authorization spec, "Token Handling").

A JWT (RFC 9068) is checked here, against the keys of the issuer it names (`oauth_issuers`), by
joserfc: the `alg` must be on the allowlist (asymmetric only: never `none`, never an HMAC, which
would let a public key be used as a shared secret), the signature must verify with the issuer's
key for its `kid`, and `iss`, `exp` (required), `nbf` and `iat` hold within `leeway` seconds. The
`aud` must name this resource (the chain passes the route's audiences, RFC 8707). Anything else is
an opaque token and goes to RFC 7662 introspection at the issuers configured for it. Before any of
it, a token too long or nesting JSON too deep is refused (`jwt_limits`), so nothing recurses on it.

A token that passed is kept (by its SHA-256 digest, never in clear) until it expires, in a bounded
cache (cachetools' `TLRUCache`), so a peer's later requests cost a hash and a lookup, not a
signature check or an introspection round trip. Introspected tokens are kept at most
`introspection_ttl` seconds, so a revocation takes effect within that; one the issuer called
inactive is remembered for 30 s (bounded too), so replaying it does not make the gateway knock on
the issuer's door for each request.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import cachetools
from joserfc import jws, jwt
from joserfc.errors import ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError

from oauth._shared import printable

from ..errors import GatewayError
from .jwt_limits import jwt_too_large
from .oauth_issuers import Issuer, IssuerError, IssuerUnavailable

__all__ = ["ALGORITHMS", "OAuthIdentity", "TokenRefused", "TokenVerifier", "token_digest"]

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519")
"""Signature algorithms an access token may use: public-key ones only (RFC 8725 §3.1, §3.2)."""


_INACTIVE = "the token is not active (revoked, expired or unknown to its issuer)"


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True, eq=False)
class OAuthIdentity:
    """Who an access token speaks for. `id` is what owns sessions; the rest rides beside it and is
    never logged (`repr` shows the id only)."""

    issuer: str = field(repr=False)
    subject: str = field(repr=False)
    scopes: frozenset[str] = field(repr=False)
    client_id: str | None = field(repr=False)
    claims: Mapping[str, Any] = field(repr=False)
    audiences: frozenset[str] = field(repr=False)
    expires: float = field(repr=False)
    jkt: str | None = field(default=None, repr=False)
    """RFC 9449 §6.1 `cnf.jkt`: the token is bound to this DPoP key; a proof must come with it."""
    keys: int | None = field(default=None, repr=False)
    """A JWT's: the `Issuer.generation` of the keys its signature was checked with (None: introspected)."""
    id: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256(f"{self.issuer}\n{self.subject}".encode()).hexdigest()[:16]
        object.__setattr__(self, "id", f"oauth:{digest}")


class TokenRefused(GatewayError):
    """A token not admitted: `status` (401, 403, 400, 503), the RFC 6750 `error`, a sentence."""

    def __init__(self, status: int, error: str, description: str, *, scope: str | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.scope = scope


def _invalid(description: str) -> TokenRefused:
    return TokenRefused(401, "invalid_token", description)


def _scopes(claims: Mapping[str, Any]) -> frozenset[str]:
    # `scope` (RFC 8693 §4.2, RFC 9068 §2.2.3); `scp` as Entra ID (a string) and Okta (a list) send it.
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list):
        return frozenset(str(s) for s in raw)
    return frozenset()


def _audiences(claims: Mapping[str, Any]) -> frozenset[str]:
    raw = claims.get("aud")
    if isinstance(raw, str):
        return frozenset((raw,))
    if isinstance(raw, list):
        return frozenset(str(a) for a in raw)
    return frozenset()


def _identity(issuer: str, claims: Mapping[str, Any], expires: float) -> OAuthIdentity:
    client = claims.get("client_id", claims.get("azp"))
    # A client-credentials token speaks for its client: RFC 7662 §2.2 makes `sub` optional.
    subject = claims.get("sub") or client
    if not isinstance(subject, str) or not subject:
        raise _invalid("the token names no subject (sub) and no client (client_id)")
    cnf = claims.get("cnf")
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    return OAuthIdentity(
        issuer=issuer,
        subject=subject,
        scopes=_scopes(claims),
        client_id=client if isinstance(client, str) else None,
        claims=dict(claims),
        audiences=_audiences(claims),
        expires=expires,
        jkt=jkt if isinstance(jkt, str) else None,
    )


class TokenVerifier:
    """Admits access tokens from `issuers`. `start()` loads each issuer's metadata and keys."""

    def __init__(
        self,
        issuers: Sequence[Issuer],
        *,
        leeway: int = 30,
        introspection_ttl: float = 300.0,
        max_cached: int = 10_000,
    ) -> None:
        self.issuers = {i.issuer: i for i in issuers}
        self.leeway = leeway
        self.introspection_ttl = introspection_ttl
        self.max_cached = max_cached
        self._admitted: cachetools.TLRUCache[bytes, OAuthIdentity] = cachetools.TLRUCache(
            maxsize=max_cached, ttu=lambda _key, identity, _now: identity.expires, timer=time.time
        )
        self._inactive: cachetools.TTLCache[bytes, bool] = cachetools.TTLCache(maxsize=max_cached, ttl=30.0)
        self.started = False

    async def start(self) -> None:
        """Load every issuer. Raises `IssuerError` naming the first one that cannot be used."""
        for issuer in self.issuers.values():
            await issuer.load()
        self.started = True

    def cached(self, digest: bytes) -> OAuthIdentity | None:
        """The identity of a token admitted before, not yet expired, and `current` (no I/O, no signature check)."""
        found = self._admitted.get(digest)
        if found is not None and not self.current(found):
            del self._admitted[digest]
            return None
        return found

    def current(self, identity: OAuthIdentity) -> bool:
        """Whether an admitted JWT's check still stands: its issuer's keys are those it was checked with, and
        fresh. After a JWKS refresh, or past its max-age, the token is checked again (`verify`), so a token
        signed with a key the issuer removed stops being admitted then, not when it expires."""
        if identity.keys is None:
            return True
        issuer = self.issuers.get(identity.issuer)
        return issuer is not None and issuer.vouches(identity.keys)

    async def verify(self, token: str, digest: bytes) -> OAuthIdentity:
        """The identity `token` speaks for; raises `TokenRefused` (audience and scope are the caller's)."""
        found = self.cached(digest)
        if found is not None:
            return found
        too_large = jwt_too_large(token, "the token")
        if too_large is not None:
            raise _invalid(too_large)
        try:
            signed = jws.extract_compact(token.encode())
        except (JoseError, ValueError, UnicodeError):
            if digest in self._inactive:
                raise _invalid(_INACTIVE) from None
            try:
                identity = await self._introspect(token)
            except TokenRefused as exc:
                if exc.description == _INACTIVE:
                    self._inactive[digest] = True
                raise
        else:
            identity = await self._check_jwt(token, signed)
        self._admitted[digest] = identity
        return identity

    async def _check_jwt(self, token: str, signed: Any) -> OAuthIdentity:
        header: dict[str, Any] = signed.headers()
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise _invalid(f"the token's alg {printable(alg, 20)} is not accepted (allowed: {', '.join(ALGORITHMS)})")
        try:
            unverified = json.loads(signed.payload)
        except ValueError:
            unverified = None
        if not isinstance(unverified, dict):
            raise _invalid("the token's payload is not a JSON object")
        issuer = self.issuers.get(str(unverified.get("iss")))
        if issuer is None:
            raise _invalid(
                f"the token is from issuer {printable(unverified.get('iss'), 120)}, which this gateway does not trust"
            )
        kid = header.get("kid")
        try:
            key = await issuer.key_for(kid if isinstance(kid, str) else None)
            generation = issuer.generation
        except IssuerUnavailable as exc:
            raise TokenRefused(503, "temporarily_unavailable", f"the token cannot be checked now: {exc}") from None
        if key is None:
            raise _invalid(f"the token is signed with a key (kid {printable(kid, 60)}) its issuer does not publish")
        try:
            claims = jwt.decode(token, key, algorithms=[alg]).claims
            jwt.JWTClaimsRegistry(
                leeway=self.leeway, iss={"essential": True, "value": issuer.issuer}, exp={"essential": True}
            ).validate(claims)
        except ExpiredTokenError:
            raise _invalid("the token has expired; get a new one") from None
        except MissingClaimError as exc:
            raise _invalid(f"the token has no {exc.claim} claim") from None
        except InvalidClaimError as exc:
            reason = "is not valid yet" if exc.claim in ("nbf", "iat") else f"has an invalid {exc.claim} claim"
            raise _invalid(f"the token {reason}") from None
        except (JoseError, ValueError):
            raise _invalid("the token's signature does not verify with its issuer's key") from None
        return replace(_identity(issuer.issuer, claims, float(claims["exp"]) + self.leeway), keys=generation)

    async def _introspect(self, token: str) -> OAuthIdentity:
        introspecting = [i for i in self.issuers.values() if i.introspection_endpoint is not None]
        if not introspecting:
            raise _invalid("the token is not a JWT, and no issuer is configured for introspection")
        for issuer in introspecting:
            try:
                answer = await issuer.introspect(token)
            except IssuerError as exc:
                raise TokenRefused(503, "temporarily_unavailable", f"the token cannot be checked now: {exc}") from None
            if answer.get("active") is not True:
                continue
            if answer.get("iss", issuer.issuer) != issuer.issuer:
                raise _invalid("the introspected token names another issuer")
            exp = answer.get("exp")
            now = time.time()
            if isinstance(exp, int | float) and exp + self.leeway <= now:
                raise _invalid("the token has expired; get a new one")
            until = min(float(exp), now + self.introspection_ttl) if isinstance(exp, int | float) else now + 60
            return _identity(issuer.issuer, answer, until)
        raise _invalid(_INACTIVE)
