"""Operations on stored grants for the CLI and operators: status and logout (RFC 7009)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx2

from .._exceptions import OAuthError
from .._grant import Grant, StoreKey
from .._shared import printable
from ..stores._store import TokenStore
from ._tokens import revoke

__all__ = ["GrantStatus", "LogoutResult", "grant_status", "logout"]


@dataclass(frozen=True, slots=True)
class GrantStatus:
    """What `--status` shows: never a token."""

    key: StoreKey
    issuer: str
    client_id: str
    client_source: str
    has_access_token: bool
    has_refresh_token: bool
    expires_in: float | None
    scope: str | None
    dead: str | None = None

    def lines(self) -> list[str]:
        """Human-readable lines (server-given text made printable)."""
        if self.dead:
            state = (
                f"dead: the authorization server refused it ({self.dead}); log in again with "
                f"`agent-sdk mcp oauth {self.key.connection}`"
            )
        elif not self.has_access_token:
            state = "registered, not logged in"
        elif self.expires_in is None:
            state = "logged in (no expiry given)"
        elif self.expires_in > 0:
            state = f"logged in; access token expires in {int(self.expires_in)}s"
        else:
            state = "access token expired" + ("; will refresh on next use" if self.has_refresh_token else "")
        return [
            f"connection: {self.key.connection}",
            f"resource: {printable(self.key.resource, 500)}",
            f"authorization server: {printable(self.issuer, 500)}",
            f"client: {printable(self.client_id)} ({self.client_source})",
            f"state: {state}",
            f"refresh token: {'yes' if self.has_refresh_token else 'no'}",
            f"scope: {printable(self.scope or '(none)', 500)}",
        ]


def grant_status(grant: Grant, now: float | None = None) -> GrantStatus:
    """The status of a stored grant."""
    tokens = grant.tokens
    current = time.time() if now is None else now
    return GrantStatus(
        key=grant.key,
        issuer=grant.issuer,
        client_id=grant.client.client_id,
        client_source=grant.client.source,
        has_access_token=tokens is not None,
        has_refresh_token=bool(tokens and tokens.refresh_token),
        expires_in=(tokens.expires_at - current) if tokens and tokens.expires_at is not None else None,
        scope=tokens.scope if tokens else None,
        dead=grant.dead,
    )


@dataclass(frozen=True, slots=True)
class LogoutResult:
    """What `logout` did, for a truthful sentence."""

    deleted: bool
    revoked: int
    revocation_supported: bool
    revocation_error: str | None = None
    had_tokens: bool = False
    """False when there was nothing to revoke (registration only, or a dead grant)."""

    @property
    def revoked_at_server(self) -> bool:
        """True when the server confirmed the refresh token (and with it the grant) is revoked."""
        return self.had_tokens and self.revocation_supported and self.revocation_error is None and self.revoked > 0


async def logout(store: TokenStore, key: StoreKey, *, http: httpx2.AsyncClient | None = None) -> LogoutResult:
    """Revoke the tokens where the server supports RFC 7009, then delete the grant.

    The grant is deleted even when revocation fails (the user asked to forget it); `revocation_error`
    then says why, so the caller can say the refresh token may still be valid at the server.
    """
    grant = await store.load(key)
    if grant is None:
        return LogoutResult(deleted=await store.delete(key), revoked=0, revocation_supported=False)
    revoked, error = 0, None
    supported = grant.revocation_endpoint is not None
    if grant.tokens is not None and grant.revocation_endpoint is not None:
        client = http or httpx2.AsyncClient(timeout=30.0)
        try:
            revoked = await revoke(client, grant.revocation_endpoint, grant.client, grant.tokens)
        except OAuthError as exc:
            error = str(exc)
        finally:
            if http is None:
                await client.aclose()
    deleted = await store.delete(key)
    return LogoutResult(
        deleted=deleted,
        revoked=revoked,
        revocation_supported=supported,
        revocation_error=error,
        had_tokens=grant.tokens is not None,
    )
