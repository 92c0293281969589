"""Operations on stored grants for the CLI and operators: status, logout (RFC 7009), copy between stores."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx2

from ._exceptions import OAuthError
from ._grant import Grant, StoreKey
from ._keyring_store import KeyringTokenStore
from ._redis_store import RedisTokenStore
from ._store import TokenStore
from ._tokens import revoke

__all__ = ["GrantStatus", "LogoutResult", "deployment_store", "grant_status", "logout", "serving_store"]

SECRETS_URL_ENV = "AGENT_SDK_SECRETS_URL"
TOKEN_STORE_ENV = "AGENT_SDK_TOKEN_STORE"


def deployment_store(environ: Mapping[str, str] | None = None) -> TokenStore:
    """The deployment secret store for `--store`: Redis when `AGENT_SDK_SECRETS_URL=redis://...`, else the keyring.

    Raises `StoreError` for a URL that is not Redis.
    """
    env = os.environ if environ is None else environ
    url = env.get(SECRETS_URL_ENV, "").strip()
    if not url:
        return KeyringTokenStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisTokenStore(url)
    from ._exceptions import StoreError

    raise StoreError(f"{SECRETS_URL_ENV} must be a redis://, rediss:// or unix:// URL")


def serving_store(state_root: Path | str, environ: Mapping[str, str] | None = None) -> TokenStore:
    """The store a serving gateway reads tokens from (and writes rotated refresh tokens back to).

    `AGENT_SDK_TOKEN_STORE=file|keyring|redis` chooses; unset, it is Redis when
    `AGENT_SDK_SECRETS_URL` is set (replicas share one store) and otherwise the local
    `mcp-auth.json` under `state_root` (what `agent-sdk mcp oauth` writes).

    Raises `StoreError` for an unknown choice or a Redis choice without a Redis URL.
    """
    from ._exceptions import StoreError
    from ._file_store import FileTokenStore

    env = os.environ if environ is None else environ
    choice = env.get(TOKEN_STORE_ENV, "").strip().lower()
    if not choice:
        choice = "redis" if env.get(SECRETS_URL_ENV, "").strip() else "file"
    if choice == "file":
        return FileTokenStore(state_root)
    if choice == "keyring":
        return KeyringTokenStore()
    if choice == "redis":
        if not env.get(SECRETS_URL_ENV, "").strip():
            raise StoreError(f"{TOKEN_STORE_ENV}=redis needs {SECRETS_URL_ENV}=redis://host:port/db")
        return deployment_store(env)
    raise StoreError(f"{TOKEN_STORE_ENV} must be file, keyring or redis, got {choice[:20]!r}")


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

    def lines(self) -> list[str]:
        """Human-readable lines."""
        if not self.has_access_token:
            state = "registered, not logged in"
        elif self.expires_in is None:
            state = "logged in (no expiry given)"
        elif self.expires_in > 0:
            state = f"logged in; access token expires in {int(self.expires_in)}s"
        else:
            state = "access token expired" + ("; will refresh on next use" if self.has_refresh_token else "")
        return [
            f"connection: {self.key.connection}",
            f"resource: {self.key.resource}",
            f"authorization server: {self.issuer}",
            f"client: {self.client_id} ({self.client_source})",
            f"state: {state}",
            f"refresh token: {'yes' if self.has_refresh_token else 'no'}",
            f"scope: {self.scope or '(none)'}",
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
    )


@dataclass(frozen=True, slots=True)
class LogoutResult:
    """What `logout` did."""

    deleted: bool
    revoked: int
    revocation_supported: bool
    revocation_error: str | None = None


async def logout(store: TokenStore, key: StoreKey, *, http: httpx2.AsyncClient | None = None) -> LogoutResult:
    """Revoke the tokens where the server supports RFC 7009, then delete the grant (even if revocation failed)."""
    grant = await store.load(key)
    if grant is None:
        return LogoutResult(deleted=False, revoked=0, revocation_supported=False)
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
    return LogoutResult(deleted=deleted, revoked=revoked, revocation_supported=supported, revocation_error=error)
