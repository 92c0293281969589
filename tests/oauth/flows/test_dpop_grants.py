"""DPoP-bound upstream grants (RFC 9449), against oidc-provider with DPoP on (it advertises
`dpop_signing_alg_values_supported`) and a resource server that checks every proof and says in its RFC 9728
metadata that it takes DPoP-bound tokens only (`resource_server.py dpop-required`), so nothing is configured:

- a login binds the grant to a key of its own, kept in the grant record; the upstream refuses the token
  without a proof, and the gateway's calls (and its refresh after a 401) succeed with one;
- a resource that wants a nonce gets it on one retry; one that demands a new nonce every time is given up
  on (`DpopNonceLoop`) after one retry, not looped;
- a token endpoint that requires a nonce (`use_dpop_nonce`, oidc-provider's `requireNonce`) is answered with
  it: the client credentials grant of a machine connection comes back DPoP-bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from oauth import (
    DpopNonceLoop,
    FileTokenStore,
    Grant,
    OAuthConfig,
    StoreKey,
    connection_auth,
    follow_redirects,
    login,
)
from tests.conftest import free_port
from tests.processes import wait_for_port

from ..helpers import call_echo
from ..peers import AuthServer, ResourceServer, exchange_provider, resource_server
from .test_cli import agent_sdk

CLI = Path(sys.executable).parent / "agent-sdk"
ACCESS_TOKEN_TTL = 60
ROOT = Path(__file__).resolve().parents[3]
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture(scope="module")
def resource(auth_server: AuthServer) -> Iterator[ResourceServer]:
    """The resource server of this module: DPoP-bound tokens only, as its metadata says."""
    with resource_server(auth_server.issuer, dpop_required=True) as server:
        yield server


def _post(url: str, headers: dict[str, str]) -> httpx2.Response:
    return httpx2.post(url, json=PING, headers={**MCP_HEADERS, **headers}, timeout=30)


def test_the_gateway_calls_with_a_dpop_bound_grant_that_the_upstream_refuses_without_a_proof(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    project = tmp_path / "project"
    folder = project / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (folder / "docs.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={resource.url!r}, oauth=True, advertise_tools=True)\n"
    )
    login_run = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert login_run.returncode == 0, login_run.stderr
    path = project / ".agent-sdk" / "mcp-auth.json"
    record = json.loads(path.read_text())["grants"]["docs"][resource.url]
    assert record["tokens"]["token_type"] == "DPoP" and record["dpop_key"]
    assert json.loads(record["dpop_key"])["kty"] == "EC"  # a private P-256 JWK of this grant's own
    assert (path.stat().st_mode & 0o777) == 0o600
    token = record["tokens"]["access_token"]

    # Without a proof the token is worth nothing to whoever holds it.
    for headers in ({"Authorization": f"Bearer {token}"}, {"Authorization": f"DPoP {token}"}):
        refused = _post(resource.url, headers)
        assert refused.status_code == 401, refused.text
        assert "DPoP-bound" in refused.headers["www-authenticate"]

    proofs = resource.stats()["dpop"]
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(CLI), "serve", "--dir", str(project), "--port", str(port)],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(port, proc)
        with httpx2.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            first = http.post("/v1/tools/echo", json={"input": {"text": "bound"}})
            assert first.status_code == 200, first.text
            assert "bound" in str(first.json()["result"])
            resource.reject_next()  # a 401: the gateway refreshes (with a proof of the same key) and retries
            second = http.post("/v1/tools/echo", json={"input": {"text": "after a 401"}})
            assert second.status_code == 200, second.text
            assert "after a 401" in str(second.json()["result"])
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert resource.stats()["dpop"] > proofs
    refreshed = json.loads(path.read_text())["grants"]["docs"][resource.url]
    assert refreshed["tokens"]["access_token"] != token and refreshed["tokens"]["token_type"] == "DPoP"
    assert refreshed["dpop_key"] == record["dpop_key"]  # one key for the grant's life
    assert record["dpop_key"] not in log.read_text()


@pytest.mark.anyio
async def test_a_resource_nonce_is_sent_on_one_retry_and_a_nonce_loop_is_refused(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    store = FileTokenStore(tmp_path)
    grant = await login("docs", resource.url, OAuthConfig(), store, interaction=follow_redirects())
    assert grant.tokens is not None and grant.tokens.token_type == "DPoP"
    assert grant.dpop_key is not None and grant.dpop_key.reveal() not in repr(grant)
    httpx2.post(f"{resource.base}/_control/dpop-nonce", params={"mode": "once"})
    try:
        demands = resource.stats()["nonce_demands"]
        auth = connection_auth("docs", resource.url, OAuthConfig(), store)
        async with auth:
            assert await call_echo(resource.url, auth, "with the nonce") == "with the nonce"
            assert await call_echo(resource.url, auth, "again") == "again"  # the nonce is remembered
        assert resource.stats()["nonce_demands"] - demands == 1

        httpx2.post(f"{resource.base}/_control/dpop-nonce", params={"mode": "always"})
        demands = resource.stats()["nonce_demands"]
        auth = connection_auth("docs", resource.url, OAuthConfig(), store)
        async with auth, httpx2.AsyncClient(auth=auth, timeout=30) as http:
            with anyio.fail_after(30), pytest.raises(DpopNonceLoop) as caught:
                await http.post(resource.url, json=PING, headers=MCP_HEADERS)
        assert "use_dpop_nonce twice in a row" in str(caught.value) and "'docs'" in str(caught.value)
        assert resource.stats()["nonce_demands"] - demands == 2  # one retry, then given up
    finally:
        httpx2.post(f"{resource.base}/_control/dpop-nonce", params={"mode": "off"})


@pytest.mark.anyio
async def test_a_token_endpoint_that_requires_a_dpop_nonce_gets_it_and_binds_the_machine_grant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_port, rs_port = free_port(), free_port()
    rs_url = f"http://127.0.0.1:{rs_port}/mcp"
    config = {
        "clients": [{"client_id": "reports", "client_secret": "reports-secret-0123456789"}],
        "resources": {rs_url: "mcp:tools"},
        "dpopNonce": True,
    }
    monkeypatch.setenv("REPORTS_SECRET", "reports-secret-0123456789")
    oauth_config = OAuthConfig(grant="client_credentials", client_id="reports", client_secret_env="REPORTS_SECRET")
    with (
        exchange_provider(config, port=as_port) as server,
        resource_server(server.issuer, port=rs_port, dpop_required=True) as rs,
    ):
        store = FileTokenStore(tmp_path)
        auth = connection_auth("reports", rs.url, oauth_config, store)
        async with auth:
            assert await call_echo(rs.url, auth, "machine") == "machine"
        stats = server.stats()
        assert stats["errors"].get("use_dpop_nonce") == 1  # the first proof had no nonce; the retry had it
        assert stats["grants"].get("client_credentials") == 1
        saved = await store.load(StoreKey("reports", rs.url))
        assert isinstance(saved, Grant) and saved.tokens is not None
        assert saved.tokens.token_type == "DPoP" and saved.dpop_key is not None
        assert rs.stats()["dpop"] >= 1
