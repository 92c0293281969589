"""An OAuth refresh is logged once for the operator (docs/operations.md), naming the connection and no
token, against oidc-provider and the audience-checking resource server."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from oauth import FileTokenStore, StoreKey
from tests.oauth.flows.test_fast_wire_oauth import logged_in_pool

from ..peers import AuthServer, ResourceServer

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


async def test_a_refresh_is_one_log_line_with_the_connection_and_no_token(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oauth")
    async with logged_in_pool(tmp_path, resource, "1") as (pool, _auth):
        await pool.call_tool("docs", "echo", {"text": "before"})
        resource.reject_next()  # the server drops the current token: one refresh
        await pool.call_tool("docs", "echo", {"text": "after"})
    refreshes = [r for r in caplog.records if getattr(r, "event", None) == "oauth_refresh"]
    assert [(r.levelname, r.getMessage(), getattr(r, "connection", None)) for r in refreshes] == [
        ("INFO", "connection 'docs': refreshed its OAuth access token", "docs")
    ]
    grant = await FileTokenStore(tmp_path).load(StoreKey("docs", resource.url))
    assert grant is not None and grant.tokens is not None
    everything = "\n".join(r.getMessage() for r in caplog.records)
    refresh = grant.tokens.refresh_token
    for secret in (grant.tokens.access_token, refresh):
        assert secret is not None and secret.reveal() not in everything
