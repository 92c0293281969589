"""`ConnectionAuth`: the `httpx2.Auth` an oauth connection's client plugs in.

Per request: inject `Authorization: Bearer`, refreshing first when the token expires within the
margin (the expiry is persisted, so this works right after a restart). On a 401: refresh once and
retry once. On a 403 `insufficient_scope`: step up (a new login for the union of scopes) at most
`max_step_ups` times in a row. Refresh is single-flight through `store.lock(key)`: under it the
grant is re-read, and if another task or process already rotated the tokens they are used as they
are, so a rotating refresh token is spent exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

import anyio
import httpx2

from .._config import OAuthConfig
from .._exceptions import (
    AuthorizationServerUnreachable,
    DpopMismatch,
    DpopNonceLoop,
    InsufficientScope,
    InvalidClient,
    InvalidGrant,
    LoginRequired,
    TokenError,
)
from .._grant import Grant, StoreKey, TokenSet, check_holder
from .._shared import Secret
from ..discovery._discovery import Challenge, parse_www_authenticate
from ..discovery._transport import require_secure
from ..stores._store import TokenStore
from ._dpop import DpopKey, binding_refusal, nonce_demanded
from ._tokens import refresh_tokens

logger = logging.getLogger(__name__)

__all__ = ["AuthStats", "ConnectionAuth", "LoginHandler"]

REFRESH_BUDGET = 60.0
"""Seconds a whole refresh (connect, send, answer) may take while the store's lock is held."""

LoginHandler = Callable[[Challenge | None, Sequence[str] | None], Awaitable[Grant]]
"""Runs a new login for (challenge, scopes) and returns the saved grant."""


@dataclass(slots=True)
class AuthStats:
    """What this auth did; for diagnostics and tests (no secrets)."""

    refreshes: int = 0
    """Refresh-token grants this object spent."""
    refresh_failures: int = 0
    """Refreshes that failed: the grant or client refused, the token endpoint silent, unreachable or wrong."""
    adopted: int = 0
    """Times it found tokens another task or process had just refreshed, and used them."""
    logins: int = 0
    step_ups: int = 0
    retries_after_401: int = 0
    invalid_grants: int = 0


class ConnectionAuth(httpx2.Auth):
    """Bearer auth with refresh and step-up for one (connection, resource URL); see the module docstring."""

    requires_request_body = True

    def __init__(
        self,
        connection: str,
        resource_url: str,
        config: OAuthConfig,
        store: TokenStore,
        *,
        login_handler: LoginHandler | None = None,
        refresh_margin: float = 60.0,
        max_step_ups: int = 2,
        http: httpx2.AsyncClient | None = None,
        principal: str = "",
    ) -> None:
        self.key = StoreKey(connection, resource_url, principal)
        self.config = config
        self.store = store
        self.stats = AuthStats()
        self._login_handler = login_handler
        self._margin = refresh_margin
        self._max_step_ups = max_step_ups
        self._step_ups_in_a_row = 0
        self._grant: Grant | None = None
        self._dpop: tuple[Secret, DpopKey] | None = None
        self._refused: Secret | None = None
        """An access token a 401 refreshed and the resource refused again: its 401s are not refreshed on."""
        self._login_lock = anyio.Lock()
        self._http = http
        self._owns_http = http is None

    def __repr__(self) -> str:
        return f"ConnectionAuth({self.key!s}, store={self.store.name!r})"

    async def aclose(self) -> None:
        """Close the token-endpoint client this object created (not the store)."""
        if self._owns_http and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> ConnectionAuth:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def _client(self) -> httpx2.AsyncClient:
        if self._http is None:
            self._http = httpx2.AsyncClient(timeout=30.0)
        return self._http

    # -- the httpx2 auth flow --

    def sync_auth_flow(self, request: httpx2.Request) -> object:  # pyright: ignore[reportIncompatibleMethodOverride]
        raise RuntimeError("ConnectionAuth works with httpx2.AsyncClient only")

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        require_secure(str(request.url), "MCP server URL")  # a bearer token never travels in clear text
        tokens = await self.current_tokens()
        if tokens is None and self._login_handler is None:
            raise self._login_required()  # nothing to send and no way to get it: say so, spend nothing
        self._apply(request, tokens)
        response = yield request

        key = self._dpop_key(tokens)
        if key is not None and response.status_code == 401 and nonce_demanded(response):
            # RFC 9449 §9: the resource wants its nonce in the proof. One retry; a second demand is a loop.
            key.remember(str(request.url), response)
            self._apply(request, tokens)
            response = yield request
            if response.status_code == 401 and nonce_demanded(response):
                raise DpopNonceLoop(
                    f"{self.key.resource} demanded a new DPoP nonce again right after one was sent "
                    f"(use_dpop_nonce twice in a row) for connection {self.key.connection!r}; the call was given up"
                )

        if response.status_code == 401 and not self._refused_after_refresh(tokens):
            challenge = parse_www_authenticate(response.headers.get("www-authenticate"))
            tokens = await self._recover(tokens, challenge)
            self.stats.retries_after_401 += 1
            self._apply(request, tokens)
            response = yield request  # one refresh, one retry: a second 401 goes back to the caller
            if response.status_code == 401:
                # Refused fresh: the binding, if the challenge says so; else refreshing again (on the next request
                # of this call) would not help either.
                await self._refuse_binding(tokens, parse_www_authenticate(response.headers.get("www-authenticate")))
                self._refused = tokens.access_token if tokens is not None else None

        while response.status_code == 403:
            challenge = parse_www_authenticate(response.headers.get("www-authenticate"))
            if challenge is None or challenge.error != "insufficient_scope":
                break
            granted = (tokens.scope or "").split() if tokens else []
            wanted = list(dict.fromkeys([*granted, *(challenge.scope or "").split()]))
            if self._login_handler is None or self._step_ups_in_a_row >= self._max_step_ups:
                name, asked = self.key.connection, " ".join(wanted)
                needs = (
                    f"{self.key.resource} needs the scope {(challenge.scope or '?')[:200]!r} for connection {name!r}"
                )
                if self._login_handler is not None:
                    raise InsufficientScope(f"{needs} and {self._step_ups_in_a_row} step-up logins did not satisfy it")
                await self._remember_step_up(asked)  # the next login asks for it (Grant.step_up)
                again = "sign in again" if self.key.principal else f"log in again with `agent-sdk mcp oauth {name}`"
                raise InsufficientScope(
                    f"{needs}; {again} (or the console's login), which asks for {asked[:300]!r}", self.key.principal
                )
            self._step_ups_in_a_row += 1
            self.stats.step_ups += 1
            tokens = (await self._login(challenge, wanted)).tokens
            self._apply(request, tokens)
            response = yield request

        if response.status_code < 400:
            self._step_ups_in_a_row = 0

    def _apply(self, request: httpx2.Request, tokens: TokenSet | None) -> None:
        if tokens is None:
            return
        key = self._dpop_key(tokens)
        if key is None:
            request.headers["Authorization"] = f"Bearer {tokens.access_token.reveal()}"
            return
        # RFC 9449 §7.1: a bound token travels as `DPoP`, with a proof for this very request and token.
        request.headers["Authorization"] = f"DPoP {tokens.access_token.reveal()}"
        request.headers["DPoP"] = key.proof(request.method, str(request.url), access_token=tokens.access_token)

    def _refused_after_refresh(self, tokens: TokenSet | None) -> bool:
        return tokens is not None and self._refused is not None and tokens.access_token == self._refused

    async def _refuse_binding(self, tokens: TokenSet | None, challenge: Challenge | None) -> None:
        """Raise when a 401 comes from the token's DPoP binding (`_dpop.binding_refusal`): a bound token at a
        resource that challenges Bearer only, or a Bearer token where it challenges DPoP only. A grant that
        `dpop=` did not force is dropped, so the next sign-in binds as the resource asks."""
        why = binding_refusal(self.key, self.config.dpop, self._dpop_key(tokens) is not None, challenge)
        if why is None:
            return
        if self.config.dpop is not None:
            raise DpopMismatch(why)
        async with self.store.lock(self.key):
            current = await self._load()
            if current is not None and current.tokens is not None and tokens is not None:
                if current.tokens.access_token == tokens.access_token:
                    self._grant = current.killed(DpopMismatch.error)
                    await self.store.save(self._grant)
        raise LoginRequired(why, self.key.principal)

    def _dpop_key(self, tokens: TokenSet | None) -> DpopKey | None:
        """The grant's DPoP key when `tokens` is a `DPoP` token, else None."""
        if tokens is None or tokens.token_type != "DPoP" or self._grant is None:
            return None
        return self._key_of(self._grant)

    def _key_of(self, grant: Grant) -> DpopKey | None:
        """`grant`'s DPoP key (RFC 9449; a bound grant also refreshes with a proof of it, §5), one object per key
        so that the nonces it learnt are kept."""
        if grant.dpop_key is None:
            return None
        if self._dpop is None or self._dpop[0] != grant.dpop_key:
            self._dpop = (grant.dpop_key, DpopKey.from_secret(grant.dpop_key, str(self.key)))
        return self._dpop[1]

    # -- tokens --

    def _margin_for(self, tokens: TokenSet) -> float:
        if tokens.expires_at is not None and tokens.issued_at is not None:
            return min(self._margin, (tokens.expires_at - tokens.issued_at) / 4)
        return self._margin

    def forget(self) -> None:
        """Drop the grant held in memory (a logout deleted it from the store): the next request reads the store."""
        self._grant = None

    async def current_tokens(self) -> TokenSet | None:
        """Tokens to send now: cached, else from the store; refreshed first when about to expire."""
        grant = self._grant
        if grant is None or grant.tokens is None:
            grant = await self._load()
            self._grant = grant
        if grant is None or grant.tokens is None:
            return None
        tokens = grant.tokens
        if tokens.expires_within(self._margin_for(tokens)) and tokens.refresh_token is not None:
            refreshed = await self.refresh(stale=tokens)
            if refreshed is not None:
                return refreshed.tokens
            if self._grant is None or self._grant.dead:
                return None
        return tokens

    async def refresh(self, stale: TokenSet | None) -> Grant | None:
        """Single-flight refresh: None when there is nothing to refresh with (or the grant was rejected)."""
        async with self.store.lock(self.key):
            current = await self._load()
            if current is None or current.tokens is None:
                self._grant = current
                return None
            tokens = current.tokens
            rotated_elsewhere = stale is None or tokens.access_token != stale.access_token
            if rotated_elsewhere and not tokens.expires_within(self._margin_for(tokens), now=time.time()):
                self.stats.adopted += 1
                self._grant = current
                return current
            if tokens.refresh_token is None:
                return None
            try:
                # Bounded well inside every store's lock lifetime (the Redis lock's TTL is 120 s), so
                # the lock is never lost while a refresh token is in flight.
                with anyio.fail_after(REFRESH_BUDGET):
                    fresh = await refresh_tokens(
                        self._client,
                        current.token_endpoint,
                        current.client,
                        tokens,
                        resource=current.resource_indicator,
                        dpop=self._key_of(current),
                    )
            except TimeoutError:
                self.stats.refresh_failures += 1
                raise AuthorizationServerUnreachable(
                    f"the token endpoint {current.token_endpoint} did not answer a refresh within "
                    f"{REFRESH_BUDGET:g} seconds"
                ) from None
            except (InvalidGrant, InvalidClient) as exc:
                # Dead at once: the next call (here or in any process sharing the store) spends nothing
                # and says "log in again"; invalid_client also retires the registration (see login()).
                self.stats.invalid_grants += isinstance(exc, InvalidGrant)
                self.stats.refresh_failures += 1
                self._grant = current.killed(exc.error)
                await self.store.save(self._grant)
                return None
            except TokenError:  # unreachable, or an answer that is not a token
                self.stats.refresh_failures += 1
                raise
            grant = current.with_tokens(fresh)
            await self.store.save(grant)
            self.stats.refreshes += 1
            logger.info(
                "connection %r: refreshed its OAuth access token",
                self.key.connection,
                extra={"event": "oauth_refresh", "connection": self.key.connection},
            )
            self._grant = grant
            return grant

    async def _remember_step_up(self, wanted: str) -> None:
        """Keep `wanted` on the stored grant: the next login (CLI, console, sign-in link) asks for it."""
        async with self.store.lock(self.key):
            current = await self._load()
            if current is not None and current.step_up != wanted:
                self._grant = replace(current, step_up=wanted)
                await self.store.save(self._grant)

    async def _load(self) -> Grant | None:
        grant = await self.store.load(self.key)
        return None if grant is None else check_holder(grant, self.key)

    async def _recover(self, used: TokenSet | None, challenge: Challenge | None) -> TokenSet | None:
        refreshed = await self.refresh(stale=used)
        if refreshed is not None and refreshed.tokens is not None:
            return refreshed.tokens
        return (await self._login(challenge, None)).tokens

    def _login_required(self) -> LoginRequired:
        name, resource = self.key.connection, self.key.resource
        dead = self._grant.dead if self._grant is not None else None
        if self.key.principal:
            # A principal's own grant: the gateway asks that principal to sign in (docs/oauth.md#per-user-grants).
            why = f"was refused by the authorization server ({dead})" if dead else "is missing"
            if dead == DpopMismatch.error:
                why = "was bound to DPoP the other way than the server takes (dpop_mismatch)"
            return LoginRequired(
                f"connection {name!r} needs your own sign-in: your grant for {resource} {why}; open the sign-in "
                "URL the gateway answers with, then retry",
                self.key.principal,
            )
        if dead == "invalid_client":
            state = f"has a dead grant for {resource}: the authorization server no longer knows its client ({dead})"
        elif dead:
            state = f"has a dead grant for {resource}: the authorization server refused it ({dead})"
        else:
            state = f"has no valid OAuth tokens for {resource}"
        return LoginRequired(f"connection {name!r} {state}; log in with `agent-sdk mcp oauth {name}`")

    async def _login(self, challenge: Challenge | None, scopes: Sequence[str] | None) -> Grant:
        if self._login_handler is None:
            raise self._login_required()
        before = self._grant
        async with self._login_lock:
            if scopes is None and self._grant is not before and self._grant and self._grant.tokens:
                return self._grant  # another task logged in while this one waited
            grant = await self._login_handler(challenge, scopes)
            self.stats.logins += 1
            self._grant = grant
            return grant
