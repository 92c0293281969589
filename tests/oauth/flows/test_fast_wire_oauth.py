"""A pooled OAuth connection's `tools/call` on the fast wire (`connections/client/_fast_calls.py`): the same
`ConnectionAuth` flow as on the SDK transport, against oidc-provider and the audience-checking resource server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from connections import (
    ClientPool,
    ConnectionsError,
    ConnectionUnauthorized,
    ConnectionUnavailable,
    define_connection,
)
from oauth import FileTokenStore, OAuthConfig, connection_auth, follow_redirects, login, logout

from ..peers import AuthServer, ResourceServer

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


@asynccontextmanager
async def logged_in_pool(tmp_path: Path, resource: ResourceServer, fast: str) -> AsyncIterator[tuple[ClientPool, Any]]:
    """A pool over the resource server with tokens from a real login; the fast wire on (`"1"`) or off (`"0"`)."""
    store = FileTokenStore(tmp_path)
    await login("docs", resource.url, OAuthConfig(), store, interaction=follow_redirects())
    auth = connection_auth("docs", resource.url, OAuthConfig(), store, refresh_margin=0)
    # protocol="legacy": the fast wire serves handshake-era sessions (this server also speaks 2026-07-28).
    defn = define_connection(url=resource.url, oauth=True, protocol="legacy").named("docs", None)
    async with auth, ClientPool({"docs": defn}, auth_for=lambda _defn: auth, fast_calls=fast == "1") as pool:
        yield pool, auth


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-wire", "sdk-transport"])
async def test_a_401_refreshes_once_and_retries_once_on_either_wire(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, fast: str
) -> None:
    async with logged_in_pool(tmp_path, resource, fast) as (pool, auth):
        first = await pool.call_tool("docs", "echo", {"text": "before"})
        assert pool.status("docs").fast_calls is (fast == "1")
        refreshes_before = auth_server.stats()["grants"].get("refresh_token", 0)
        unauthorized_before = resource.stats()["unauthorized"]

        resource.reject_next()  # the server drops the current token mid-session
        second = await pool.call_tool("docs", "echo", {"text": "after"})

    assert [first["content"][0]["text"], second["content"][0]["text"]] == ["before", "after"]
    assert auth.stats.retries_after_401 == 1
    assert auth.stats.refreshes == 1
    assert auth.stats.logins == 0
    assert resource.stats()["unauthorized"] - unauthorized_before == 1
    assert auth_server.stats()["grants"].get("refresh_token", 0) - refreshes_before == 1


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-wire", "sdk-transport"])
async def test_a_401_after_logout_fails_with_the_login_sentence_on_either_wire(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, fast: str
) -> None:
    async with logged_in_pool(tmp_path, resource, fast) as (pool, auth):
        await pool.call_tool("docs", "echo", {"text": "before"})
        await logout(auth.store, auth.key)  # the tokens are revoked and the grant is gone from the store
        resource.reject_next()
        with pytest.raises(ConnectionsError) as first:
            await pool.call_tool("docs", "echo", {"text": "after"})
        with pytest.raises(ConnectionsError) as second:
            await pool.call_tool("docs", "echo", {"text": "again"})

    sentence = f"has no valid OAuth tokens for {resource.url}; log in with `agent-sdk mcp oauth docs`"
    if fast == "1":
        # The fast wire runs the auth flow in the caller's task: its error arrives whole.
        assert isinstance(first.value, ConnectionUnauthorized) and sentence in str(first.value)
    else:
        # The SDK transport runs it in its own task and reports only that the connection closed;
        # the pool reopens, and the open meets the same flow.
        assert isinstance(first.value, ConnectionUnavailable), first.value
    assert isinstance(second.value, ConnectionUnauthorized), second.value
    assert sentence in str(second.value)
    assert str(second.value).count("'docs'") == 1, second.value  # the connection is named once, not twice
    assert second.value.code == "connection_unauthorized"
