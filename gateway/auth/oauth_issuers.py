"""The authorization servers the gateway trusts, as a protected resource: their metadata and keys.

`Issuer.load` reads the issuer's RFC 8414 metadata (then OIDC Discovery, the MCP spec's order),
checks that it names itself (RFC 8414 §3.3), and fetches its JWKS. Only asymmetric signing keys are
kept (RSA, EC, OKP): a MAC key in a JWKS would let anyone who can read the JWKS mint tokens.
`Issuer.key_for` answers a token's `kid` from the keys held while they are fresh: for the JWKS's
`Cache-Control: max-age`, bounded to 5 to 60 minutes (5 without one, or with `no-store`/`no-cache`).
Past that, the next token fetches the JWKS again, so a key the issuer removed stops being trusted
within the max-age. An unknown `kid` fetches it again too (a key rotation), at most once per
`refetch_interval` (10 s; the load at start does not count: a key rotated just after it is found), so
a flood of made-up `kid`s costs the issuer one request per interval and delays a real new key by at
most that long (and not at all when the issuer publishes it a max-age before signing with it, as
rotation guidance has it). A refresh the issuer does not answer keeps the keys held (tokens they sign
are still checked) and is tried again after the interval; a `kid` they lack then gets a 503.

Every failure is an `IssuerUnavailable` (the network, the issuer's status, its JSON) or an
`IssuerMisconfigured` (what it served cannot be used): `serve` prints either and exits at start;
afterwards the chain answers 503 for a token it cannot check (never admits it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from authlib.common.security import is_secure_transport
from authlib.oauth2.rfc8414 import get_well_known_url
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, OKPKey, RSAKey

from oauth._shared import printable

from ..errors import GatewayError

__all__ = ["Issuer", "IssuerError", "IssuerMisconfigured", "IssuerUnavailable", "introspection_credentials"]

SIGNING_KEY_TYPES = {"RSA": RSAKey, "EC": ECKey, "OKP": OKPKey}
"""The key types a JWKS may hold for access tokens; `oct` (a shared secret) never."""

_TIMEOUT = 5.0

MAX_AGE_BOUNDS = (300.0, 3600.0)
"""How long a JWKS is used before it is fetched again: its `max-age`, kept within these seconds."""

logger = logging.getLogger("agent_sdk.auth")


def jwks_max_age(cache_control: str | None) -> float:
    """Seconds a JWKS served with `cache_control` is used: its `max-age` within `MAX_AGE_BOUNDS`; the lower
    bound without one, with `no-store` or `no-cache`, or with one that is not a number."""
    low, high = MAX_AGE_BOUNDS
    directives = [d.strip().lower() for d in (cache_control or "").split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return low
    for directive in directives:
        name, _, value = directive.partition("=")
        if name.strip() == "max-age" and value.strip().strip('"').isdigit():
            return min(max(float(value.strip().strip('"')), low), high)
    return low


class IssuerError(GatewayError):
    """An issuer's metadata or keys cannot be used; the message is a sentence naming the issuer."""


class IssuerUnavailable(IssuerError):
    """The issuer (or its JWKS or introspection endpoint) did not answer with usable JSON."""


class IssuerMisconfigured(IssuerError):
    """The issuer answered, but with something the gateway cannot use (wrong issuer, no keys)."""


def require_https(url: str, what: str) -> str:
    """`url` when it is https, or http on loopback (RFC 8252 §7.3); raises `ValueError` otherwise."""
    if not is_secure_transport(url) or not url.lower().startswith(("https://", "http://")):
        raise ValueError(f"{what} {printable(url, 200)} must be an absolute https URL (http only on loopback)")
    return url


def introspection_credentials(environ: dict[str, str] | Any) -> tuple[str, str] | None:
    """`AGENT_SDK_OAUTH_CLIENT_ID` and `AGENT_SDK_OAUTH_CLIENT_SECRET` (RFC 7662 §2.1: the gateway
    authenticates to the introspection endpoint), or None when either is unset."""
    client_id = environ.get("AGENT_SDK_OAUTH_CLIENT_ID")
    secret = environ.get("AGENT_SDK_OAUTH_CLIENT_SECRET")
    return (client_id, secret) if client_id and secret else None


async def _get_json(http: httpx2.AsyncClient, url: str, what: str) -> dict[str, Any]:
    return (await _get_json_with_headers(http, url, what))[0]


async def _get_json_with_headers(http: httpx2.AsyncClient, url: str, what: str) -> tuple[dict[str, Any], Any]:
    try:
        response = await http.get(url, headers={"accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise IssuerUnavailable(f"{what} at {printable(url, 200)} cannot be reached ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise IssuerUnavailable(f"{what} at {printable(url, 200)} answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise IssuerUnavailable(f"{what} at {printable(url, 200)} is not a JSON object")
    return data, response.headers


def usable_keys(jwks: dict[str, Any]) -> KeySet:
    """The JWKS's asymmetric signing keys (no `oct`, no `use: enc`); skips keys that do not import."""
    keys: list[Any] = []
    for raw in jwks.get("keys") or []:
        if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
            continue
        kind = SIGNING_KEY_TYPES.get(str(raw.get("kty")))
        if kind is None:
            continue
        try:
            keys.append(kind.import_key(raw))
        except (JoseError, ValueError, TypeError):
            continue
    return KeySet(keys)


@dataclass(slots=True)
class Issuer:
    """One trusted authorization server: its metadata and its current signing keys."""

    issuer: str
    refetch_interval: float = 10.0
    introspection: tuple[str, str] | None = None
    """Client credentials for RFC 7662 introspection; None: opaque tokens are not accepted from it."""
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    keys: KeySet = field(default_factory=lambda: KeySet([]))
    clock: Callable[[], float] = time.monotonic
    generation: int = 0
    """Counts the JWKS fetches: a token checked with older keys is checked again (`TokenVerifier.current`)."""
    _refetched_at: float = float("-inf")
    _fresh_until: float = float("-inf")
    _lock: anyio.Lock | None = None

    @property
    def introspection_endpoint(self) -> str | None:
        endpoint = self.metadata.get("introspection_endpoint")
        return endpoint if isinstance(endpoint, str) and self.introspection is not None else None

    @property
    def dpop_algs(self) -> tuple[str, ...]:
        """`dpop_signing_alg_values_supported` (RFC 9449 §5.1): the issuer binds tokens to DPoP keys."""
        values = self.metadata.get("dpop_signing_alg_values_supported")
        return tuple(str(v) for v in values) if isinstance(values, list) else ()

    async def load(self) -> None:
        """Fetch the metadata and the JWKS. Raises `IssuerUnavailable`, `IssuerMisconfigured`."""
        async with httpx2.AsyncClient(timeout=_TIMEOUT) as http:
            self.metadata = await self._metadata(http)
            await self._fetch_keys(http)
        if not self.keys.keys:
            raise IssuerMisconfigured(
                f"the JWKS of issuer {printable(self.issuer, 200)} has no usable signing key (RSA, EC or OKP "
                "with use sig); configure the issuer to publish its token signing key"
            )

    async def _metadata(self, http: httpx2.AsyncClient) -> dict[str, Any]:
        urls = [get_well_known_url(self.issuer, external=True)]
        urls.append(f"{self.issuer.rstrip('/')}/.well-known/openid-configuration")
        problems: list[str] = []
        for url in urls:
            try:
                data = await _get_json(http, url, "the metadata")
            except IssuerUnavailable as exc:
                problems.append(str(exc))
                continue
            if data.get("issuer") != self.issuer:  # RFC 8414 §3.3, OIDC Discovery §4.3
                raise IssuerMisconfigured(
                    f"the metadata at {printable(url, 200)} names issuer {printable(data.get('issuer'), 200)}, "
                    f"not {printable(self.issuer, 200)}; pass --oauth-issuer exactly as the issuer names itself"
                )
            jwks_uri = data.get("jwks_uri")
            if not isinstance(jwks_uri, str):
                raise IssuerMisconfigured(f"the metadata at {printable(url, 200)} has no jwks_uri")
            try:
                require_https(jwks_uri, "the jwks_uri")
            except ValueError as exc:
                raise IssuerMisconfigured(f"issuer {printable(self.issuer, 200)}: {exc}") from None
            return data
        raise IssuerUnavailable(
            f"the metadata of issuer {printable(self.issuer, 200)} cannot be read: {'; '.join(problems)}"
        )

    async def _fetch_keys(self, http: httpx2.AsyncClient) -> None:
        """The JWKS now, used until its max-age has passed (`jwks_max_age`)."""
        what = f"the JWKS of issuer {printable(self.issuer, 200)}"
        jwks, headers = await _get_json_with_headers(http, self.metadata["jwks_uri"], what)
        self.keys = usable_keys(jwks)
        self.generation += 1
        self._fresh_until = self.clock() + jwks_max_age(headers.get("cache-control"))

    def vouches(self, generation: int) -> bool:
        """Whether a check made with the keys of `generation` still stands: they are the keys held, and within
        their max-age (or a failed refresh's retry interval)."""
        return generation == self.generation and self.clock() < self._fresh_until

    async def _refetch(self) -> None:
        self._refetched_at = self.clock()  # a failed fetch counts too: the issuer is not asked again at once
        async with httpx2.AsyncClient(timeout=_TIMEOUT) as http:
            await self._fetch_keys(http)

    def cached_key(self, kid: str | None) -> Any | None:
        """The signing key named `kid` (or the only one, when the token names none), if held now."""
        try:
            return self.keys.get_by_kid(kid)
        except (JoseError, ValueError):
            return None

    async def key_for(self, kid: str | None) -> Any | None:
        """The key for `kid` (module docstring): from the keys held while fresh, else after fetching the JWKS
        again (past its max-age; for an unknown `kid`, at most once per interval).

        None: the issuer does not publish it. Raises `IssuerUnavailable` when a fetch fails and the keys
        held have no such key."""
        key = self.cached_key(kid)
        if key is not None and self.clock() < self._fresh_until:
            return key
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.clock() >= self._fresh_until:  # past its max-age (and not fetched while this one waited)
                try:
                    await self._refetch()
                except IssuerUnavailable as exc:
                    self._fresh_until = self.clock() + self.refetch_interval  # keep the keys held; retry then
                    if self.cached_key(kid) is None:
                        raise
                    logger.warning("%s; the keys held are used until it answers", exc)
                return self.cached_key(kid)
            key = self.cached_key(kid)  # fetched by another request while this one waited
            if key is not None or self.clock() - self._refetched_at < self.refetch_interval:
                return key
            await self._refetch()
        return self.cached_key(kid)

    async def introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662 introspection of `token`. Raises `IssuerUnavailable`."""
        endpoint = self.introspection_endpoint
        assert endpoint is not None and self.introspection is not None
        try:
            async with httpx2.AsyncClient(timeout=_TIMEOUT) as http:
                response = await http.post(
                    endpoint,
                    data={"token": token, "token_type_hint": "access_token"},
                    auth=httpx2.BasicAuth(*self.introspection),
                    headers={"accept": "application/json"},
                )
        except httpx2.HTTPError as exc:
            raise IssuerUnavailable(
                f"the introspection endpoint of issuer {printable(self.issuer, 200)} cannot be reached "
                f"({type(exc).__name__})"
            ) from None
        try:
            data: Any = response.json() if response.status_code == 200 else None
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise IssuerUnavailable(
                f"the introspection endpoint of issuer {printable(self.issuer, 200)} answered HTTP "
                f"{response.status_code}; check AGENT_SDK_OAUTH_CLIENT_ID and AGENT_SDK_OAUTH_CLIENT_SECRET"
            )
        return data
