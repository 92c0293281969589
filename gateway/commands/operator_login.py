"""The CLI's operator credential for a gateway: `AGENT_SDK_OPERATOR_TOKEN`, or `agent-sdk login --gateway URL`.

On a gateway with `--oauth-issuer`, an operator is a person whose token the IdP issued with the operator scope or
claim (`--operator-scope`, `--operator-claim`). `agent-sdk login --gateway URL` gets one: `oauth.login`, the same
authorization-code + PKCE flow as `agent-sdk mcp oauth`, pointed at the gateway itself (its RFC 9728 metadata
names the IdP; RFC 7591 registration; a loopback redirect, the browser opened or the URL printed with
`--no-browser`), for the gateway's base URL as the resource. The grant (with its refresh token) is kept in
`<config dir>/mcp-auth.json` (0600, as every file store), keyed by the gateway URL, and refreshed when it nears
expiry. The commands that act on the gateway (`approvals`) send `AGENT_SDK_OPERATOR_TOKEN` when set, else that
grant's access token; a refusal for want of either names both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import httpx2

from connections.serving import account_file
from oauth import (
    ConnectionAuth,
    FileTokenStore,
    OAuthConfig,
    OAuthError,
    login,
    open_browser,
    print_url,
)
from oauth._shared import printable

from ..errors import CliError

__all__ = ["OPERATOR_LOGIN", "OPERATOR_TOKEN_ENV", "login_gateway", "missing_credential", "operator_token"]

OPERATOR_LOGIN = "agent-sdk:operator"
"""The `StoreKey.connection` of an operator's grant for a gateway (no connection name has a colon)."""
OPERATOR_TOKEN_ENV = "AGENT_SDK_OPERATOR_TOKEN"
_CONFIG = OAuthConfig(scopes=("openid",), client_name="agent-sdk CLI", dpop=False)
"""`openid`: a person signing in (OpenID Connect), when neither `--scope` nor the gateway names scopes. Never
DPoP-bound: the commands send the credential as `Authorization: Bearer` (RFC 9449 §5: the client chooses)."""


def _base(url: str) -> str:
    return url.rstrip("/")


def _store() -> FileTokenStore:
    return FileTokenStore(Path(account_file()).parent)


def login_gateway(url: str, *, scopes: list[str], browser: bool, timeout: float = 300.0) -> int:
    """`agent-sdk login --gateway URL`: sign in with the gateway's IdP and keep the grant. Raises `CliError`."""
    base = _base(url)

    async def run() -> str:
        store = _store()
        try:
            async with httpx2.AsyncClient(timeout=30.0) as http:
                interaction = open_browser(sys.stderr) if browser else print_url(sys.stderr, sys.stdin)
                grant = await login(
                    OPERATOR_LOGIN,
                    base,
                    _CONFIG,
                    store,
                    interaction=interaction,
                    http=http,
                    scopes=scopes or None,
                    login_timeout=timeout,
                    verify_client=True,
                    status=lambda text: print(text, file=sys.stderr, flush=True),
                )
            return printable(grant.issuer)
        finally:
            await store.aclose()

    try:
        issuer = anyio.run(run)
    except OAuthError as exc:
        raise CliError(f"signing in to {base} failed: {exc}") from None
    print(
        f"signed in to {base} with {issuer}; the operator credential is in {_store().name} (refreshed as needed). "
        f"Commands such as `agent-sdk approvals list --url {base}` use it; {OPERATOR_TOKEN_ENV}, when set, wins."
    )
    return 0


def operator_token(url: str) -> str | None:
    """The operator credential for the gateway at `url`: `AGENT_SDK_OPERATOR_TOKEN` (its first token), else the
    access token `agent-sdk login --gateway` stored for it (refreshed when about to expire); None without either.
    Raises `CliError` for a store that cannot be read."""
    token = os.environ.get(OPERATOR_TOKEN_ENV, "").split(",")[0].strip()
    if token:
        return token

    async def stored() -> str | None:
        store = _store()
        auth = ConnectionAuth(OPERATOR_LOGIN, _base(url), _CONFIG, store)
        try:
            tokens = await auth.current_tokens()
        finally:
            await auth.aclose()
            await store.aclose()
        return tokens.access_token.reveal() if tokens is not None else None

    try:
        return anyio.run(stored)
    except OAuthError as exc:
        raise CliError(f"the stored operator credential for {_base(url)} cannot be used: {exc}") from None


def missing_credential(url: str, refused: bool) -> str:
    """The sentence for a command the gateway refused for want of an operator credential (`refused`: one was sent)."""
    base = _base(url)
    how = (
        f"set {OPERATOR_TOKEN_ENV} to one of the tokens serve was given with --operator-token, or, on a gateway "
        f"with --oauth-issuer, run `agent-sdk login --gateway {base}` as a person the gateway names an operator"
    )
    if refused:
        return f"the gateway at {base} refused the operator credential this command sent; {how}"
    return f"the gateway at {base} needs an operator credential and this command has none; {how}"
