"""End to end against oidc-provider (npm) protecting a real MCP resource server that checks the audience."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from oauth import FileTokenStore, OAuthConfig, connection_auth, follow_redirects, login

from ..helpers import call_echo, run_worker
from ..peers import AuthServer, ResourceServer

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


async def test_login_call_expire_restart_refreshes_without_a_new_login(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    before = auth_server.stats()
    store = FileTokenStore(tmp_path)
    grant = await login("docs", resource.url, OAuthConfig(), store, interaction=follow_redirects())
    assert grant.tokens is not None and grant.tokens.refresh_token is not None
    assert grant.tokens.expires_at is not None
    assert grant.client.source == "dynamic"
    assert grant.resource_indicator == resource.url

    auth = connection_auth("docs", resource.url, OAuthConfig(), store)
    async with auth:
        assert await call_echo(resource.url, auth, "first") == "first"
    assert auth.stats.refreshes == 0 and auth.stats.logins == 0

    # Let the access token expire for real: the resource server checks `exp`.
    await anyio.sleep(max(0.0, grant.tokens.expires_at - time.time()) + 0.5)

    # Restart: a new process, a new store object, the same mcp-auth.json; it may never log in.
    report = await run_worker(tmp_path, "docs", resource.url, calls=1, rounds=1, until=0)
    assert report["ok"] == 1 and report["failed"] == 0, report
    assert report["refreshes"] == 1 and report["logins"] == 0, report

    after = auth_server.stats()
    assert after["codes"] - before["codes"] == 1  # the one login; the restart did not log in again
    assert after["grants"].get("refresh_token", 0) - before["grants"].get("refresh_token", 0) == 1
    assert after["errors"].get("invalid_grant", 0) == before["errors"].get("invalid_grant", 0)


async def test_a_401_mid_session_refreshes_once_and_retries_once(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    store = FileTokenStore(tmp_path)
    await login("docs", resource.url, OAuthConfig(), store, interaction=follow_redirects())
    auth = connection_auth("docs", resource.url, OAuthConfig(), store, refresh_margin=0)
    async with auth:
        assert await call_echo(resource.url, auth, "before") == "before"
        refreshes_before = auth_server.stats()["grants"].get("refresh_token", 0)
        unauthorized_before = resource.stats()["unauthorized"]

        resource.reject_next()  # the server drops the current token mid-session
        assert await call_echo(resource.url, auth, "after") == "after"

    assert auth.stats.retries_after_401 == 1
    assert auth.stats.refreshes == 1
    assert auth.stats.logins == 0
    assert resource.stats()["unauthorized"] - unauthorized_before == 1
    assert auth_server.stats()["grants"].get("refresh_token", 0) - refreshes_before == 1
