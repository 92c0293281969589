"""Connections that act with each caller's own credential: `oauth=OAuthConfig(grant="token_exchange")` or
`grant="id_jag"` (docs/oauth.md).

Each call's upstream token is made from the token its caller presented to the gateway
(`oauth.CallerGrants`: exchanged at the caller's IdP, cached per subject token). The broker hands the call
to the identity pool with that token as the identity's `Authorization` header, so every token presented
(every principal, and each of a person's clients) has its own clients exactly as an `auth=` callback's
identity has (one upstream session each at the handshake versions, per-request headers on a shared
2026-07-28 client). The connection's shared pooled client
never calls: `CallerOnly` refuses its every request, so a call without a caller (`host.mcp` from a
server tool, a loopback or static-bearer peer) fails closed with a sentence instead of going out with
no credential, or another's.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

import httpx2

from oauth import CallerGrants, CallerTokenRequired, OAuthError, PresentedToken, is_caller_grant, presented

from .._exceptions import AuthorizationUnavailable, ConnectionsError, ConnectionUnauthorized
from ..client._identity import SessionHeaders
from ..project._definitions import ConnectionDefinition

__all__ = ["CallerCredentials", "CallerOnly", "by_caller"]


def by_caller(defn: ConnectionDefinition) -> bool:
    """Whether `defn`'s upstream token is each caller's own (token exchange, ID-JAG)."""
    return defn.oauth is not None and is_caller_grant(defn.oauth.grant)


class CallerOnly(httpx2.Auth):
    """The auth of a caller-credential connection's shared client: every request is refused, unsent."""

    def __init__(self, connection: str, grant: str) -> None:
        self._connection = connection
        self._grant = grant

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        raise CallerTokenRequired(
            f"connection {self._connection!r} acts with each caller's own OAuth token (grant={self._grant!r}); "
            "it has no credential of the gateway's own, so only a call made for an OAuth peer can use it"
        )
        yield request  # pragma: no cover - an async generator that never sends


class CallerCredentials:
    """The broker's `CallerGrants`, one per caller-credential connection, sharing the broker's OAuth client."""

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self._http = http
        self._grants: dict[str, CallerGrants] = {}

    def grants(self, defn: ConnectionDefinition) -> CallerGrants:
        found = self._grants.get(defn.name)
        if found is None:
            assert defn.oauth is not None and defn.url is not None
            found = self._grants[defn.name] = CallerGrants(defn.name, defn.url, defn.oauth, http=self._http)
        return found

    def exchanges(self) -> dict[str, int]:
        """Tokens made so far, by connection (metrics)."""
        return {name: grants.stats.exchanges for name, grants in self._grants.items()}

    async def headers(self, defn: ConnectionDefinition, caller: PresentedToken | None = None) -> SessionHeaders:
        """The current caller's identity on `defn`: its upstream token as `Authorization`. Raises
        `ConnectionUnauthorized` (no caller token, the IdP or the upstream's server refused) or
        `AuthorizationUnavailable` (one of them did not answer), each naming the connection."""
        caller = caller if caller is not None else presented()
        try:
            made = await self.grants(defn).token(caller)
        except OAuthError as exc:
            raise _typed(defn.name, exc) from None
        tokens = made.tokens
        # One upstream identity per presented token: a person's two clients (two tokens, two exchanged tokens) are
        # two identities that do not retire each other on every call; a token no longer used closes when idle.
        owner = f"{caller.principal}\x00{caller.digest()[:16]}" if caller is not None else None
        return SessionHeaders({"Authorization": f"Bearer {tokens.access_token.reveal()}"}, session_id=owner)


def _typed(name: str, exc: OAuthError) -> ConnectionsError:
    said = str(exc)
    own = f"connection {name!r} "
    said = said.removeprefix(own)
    if exc.error == "authorization_server_unreachable":
        return AuthorizationUnavailable(name, f"cannot make the caller's upstream token: {said}")
    return ConnectionUnauthorized(name, f"cannot make the caller's upstream token ({exc.error}): {said}")
