"""`CallerGrants`: one connection's upstream tokens made from each caller's own token, cached per token.

For `OAuthConfig(grant="token_exchange")` the caller's access token (`presented()`) is exchanged at
its issuer's token endpoint (RFC 8693) for one whose audience is the upstream; for `grant="id_jag"`
the same exchange asks for an ID-JAG for the upstream's authorization server, which redeems it with
the JWT bearer grant. The caller's own token is
never sent upstream: it goes only to the IdP that issued it.

The result is kept per subject token (keyed by the SHA-256 of the token the caller presented; a bounded
`cachetools.TLRUCache`, in this process's memory only) until shortly before it expires (60 s, or a
quarter of its lifetime when that is shorter), so a token's calls cost one exchange per upstream token
lifetime; a miss is single-flight per token. Never per principal: two tokens of one person (two clients,
one of which the IdP will not exchange for) are two exchanges, and a token the IdP refuses fails even
when another of the same person's tokens was exchanged. Other replicas exchange for themselves. The
gateway authenticates as its own client from the environment (`client_id` with `client_secret_env` or
`private_key_env`, `_machine.machine_client`), optionally with an `actor_token` (`actor_token_env`).
"""

from __future__ import annotations

import os
import time
import weakref
from dataclasses import dataclass, replace

import anyio
import cachetools
import httpx2

from .._config import OAuthConfig
from .._exceptions import CallerTokenRequired, DiscoveryError, RegistrationError
from .._grant import TokenSet
from .._shared import Secret
from ..discovery._discovery import Discovery, ServerMetadata
from ._exchange import exchange_token, redeem_id_jag, request_id_jag
from ._login import probe_challenge
from ._machine import machine_client
from ._presented import PresentedToken, presented

__all__ = ["CallerGrants", "CallerStats", "UpstreamToken", "is_caller_grant"]

_CALLER_GRANTS = ("token_exchange", "id_jag")


def is_caller_grant(grant: str) -> bool:
    """Whether `OAuthConfig.grant` makes the upstream token from each caller's own (token exchange, ID-JAG)."""
    return grant in _CALLER_GRANTS


_UNKNOWN_LIFETIME = 300.0
"""How long a token whose server named no `expires_in` is kept (never past the caller's own token)."""


@dataclass(frozen=True, slots=True)
class UpstreamToken:
    """A principal's upstream access token, and until when it is used."""

    tokens: TokenSet
    keep_until: float


@dataclass(slots=True)
class CallerStats:
    """What this connection's exchanges did (for metrics and tests; no secrets)."""

    exchanges: int = 0
    failures: int = 0
    cached: int = 0


@dataclass(frozen=True, slots=True)
class _Target:
    resource: str
    scope: str | None
    server: ServerMetadata | None
    """`id_jag`: the upstream's authorization server (the ID-JAG's audience)."""


def _keep_until(_key: str, value: UpstreamToken, _now: float) -> float:
    return value.keep_until


class CallerGrants:
    """Upstream tokens for `connection` made from each caller's own token; see the module docstring."""

    def __init__(
        self,
        connection: str,
        resource_url: str,
        config: OAuthConfig,
        *,
        http: httpx2.AsyncClient,
        margin: float = 60.0,
        max_tokens: int = 10_000,
    ) -> None:
        if not is_caller_grant(config.grant):
            raise ValueError(f"grant {config.grant!r} is not a caller's own credential")
        self.connection = connection
        self.resource_url = resource_url
        self.config = config
        self.stats = CallerStats()
        self._http = http
        self._margin = margin
        self._discovery = Discovery(http)
        self._target: _Target | None = None
        self._cache: cachetools.TLRUCache[str, UpstreamToken] = cachetools.TLRUCache(
            maxsize=max_tokens, ttu=_keep_until, timer=time.time
        )
        self._locks: weakref.WeakValueDictionary[str, anyio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"CallerGrants({self.connection!r}, grant={self.config.grant!r})"

    def forget(self, caller: PresentedToken) -> None:
        """Drop the token made from `caller`'s (the upstream refused it): its next call exchanges again."""
        self._cache.pop(caller.digest(), None)

    async def token(self, caller: PresentedToken | None = None) -> UpstreamToken:
        """The upstream token for `caller` (default: the current request's, `presented()`).

        Raises `CallerTokenRequired` (no caller token), `InvalidGrant` / `InvalidTarget` (the IdP refused),
        `AssertionRefused` (an ID-JAG for another server), `RegistrationError` (the
        gateway's client is not configured), `DiscoveryError`, `TokenError`."""
        caller = caller if caller is not None else presented()
        if caller is None:
            raise CallerTokenRequired(
                f"connection {self.connection!r} acts with each caller's own OAuth token "
                f"(grant={self.config.grant!r}), and this call carries none; call it as a peer signed in at the "
                "gateway's --oauth-issuer"
            )
        key = caller.digest()
        found = self._cache.get(key)
        if found is not None:
            self.stats.cached += 1
            return found
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            found = self._cache.get(key)
            if found is not None:
                return found
            try:
                made = await self._make(caller)
            except Exception:
                self.stats.failures += 1
                raise
            self.stats.exchanges += 1
            self._cache[key] = made
            return made

    async def _make(self, caller: PresentedToken) -> UpstreamToken:
        target = await self._upstream()
        idp = await self._discovery.server_metadata(caller.issuer)
        actor = self._actor_token()
        config = self.config
        if config.grant == "token_exchange":
            tokens = await exchange_token(
                self._http,
                idp.token_endpoint,
                machine_client(config, idp),
                caller.token,
                resource=target.resource,
                audience=config.audience,
                scope=target.scope,
                actor_token=actor,
            )
        else:
            server = target.server
            assert server is not None
            idp_client = machine_client(
                replace(
                    config,
                    client_id=config.idp_client_id,
                    client_secret_env=config.idp_client_secret_env,
                    private_key_env=None,
                ),
                idp,
            )
            assertion = await request_id_jag(
                self._http,
                idp.token_endpoint,
                idp_client,
                caller.token,
                authorization_server=server.issuer,
                resource=target.resource,
                scope=target.scope,
                actor_token=actor,
            )
            tokens = await redeem_id_jag(
                self._http, server.token_endpoint, machine_client(config, server), assertion, scope=target.scope
            )
        return UpstreamToken(tokens, self._until(tokens, caller))

    def _until(self, tokens: TokenSet, caller: PresentedToken) -> float:
        now = time.time()
        expires = tokens.expires_at if tokens.expires_at is not None else now + _UNKNOWN_LIFETIME
        if tokens.expires_at is None:
            expires = min(expires, caller.expires_at)
        margin = min(self._margin, max(expires - now, 0.0) / 4)
        return expires - margin

    async def _upstream(self) -> _Target:
        """The upstream's resource identifier (RFC 9728) and, for `id_jag`, its authorization server."""
        if self._target is not None:
            return self._target
        challenge = await probe_challenge(self._http, self.resource_url)
        prm = await self._discovery.resource_metadata(self.resource_url, challenge)
        resource = prm.resource if prm is not None else self.resource_url
        scope = challenge.scope if challenge is not None and challenge.scope else None
        if scope is None and self.config.scopes:
            scope = " ".join(self.config.scopes)
        server: ServerMetadata | None = None
        if self.config.grant == "id_jag":
            if prm is None or not prm.authorization_servers:
                raise DiscoveryError(
                    f"connection {self.connection!r} uses grant='id_jag', and {self.resource_url} publishes no "
                    "protected resource metadata (RFC 9728) naming its authorization server"
                )
            server = await self._discovery.server_metadata(prm.authorization_servers[0])
            if not self.config.idp_client_id or not self.config.idp_client_secret_env:
                raise RegistrationError(
                    f"connection {self.connection!r} uses grant='id_jag' and needs idp_client_id=... and "
                    "idp_client_secret_env=... (the gateway's client at the identity provider)"
                )
        self._target = _Target(resource, scope, server)
        return self._target

    def _actor_token(self) -> Secret | None:
        name = self.config.actor_token_env
        if not name:
            return None
        value = os.environ.get(name)
        if not value:
            raise RegistrationError(
                f"the actor token variable {name} is not set; export it before the connection is used"
            )
        return Secret(value)
