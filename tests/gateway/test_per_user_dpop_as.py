"""DPoP where the upstream's authorization server asks for it (docs/oauth.md, "DPoP-bound grants").

oidc-provider registers every client with `dpop_bound_access_tokens: true` (RFC 9449 §5.2): it refuses a
token request without a DPoP proof. The audience-checking MCP server takes Bearer and DPoP tokens alike and
says nothing of DPoP, so only the registration response tells. A person signs in to the per-user connection
(no `dpop=` set) through the link their call is answered with: the grant is bound, and each call carries a
proof the server checks; `agent-sdk mcp oauth` binds its grant the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.oauth.flows.test_cli import agent_sdk, make_project
from tests.oauth.peers import AuthServer, ResourceServer, oidc_provider

from .conftest import Served
from .per_user import per_user_gateway, sign_in, sign_in_url_in, text_of, whoami


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthServer]:
    with oidc_provider(3600, dpop_bound_clients=True) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    with per_user_gateway(tmp_path_factory.mktemp("per-user-dpop-as"), resource.url) as served:
        yield served


def test_an_authorization_server_that_registers_the_client_dpop_bound_gets_bound_grants_and_proofs(
    gateway: Served, resource: ResourceServer, auth_server: AuthServer
) -> None:
    before = resource.stats()
    with httpx2.Client(timeout=30.0) as http:
        first = whoami(http, gateway.url, "alice")
        assert first["isError"] and "sign_in_required" in text_of(first), first
        page = sign_in(sign_in_url_in(text_of(first)), "alice")
        assert page.status_code == 200 and "Signed in" in page.text, page.text
        answered = whoami(http, gateway.url, "alice")
    assert (answered["isError"], answered.get("structuredContent")) == (False, {"result": "alice"}), answered
    after = resource.stats()
    assert after["dpop"] > before["dpop"]  # the token was bound, and the call came with a valid proof
    assert "invalid_grant" not in auth_server.stats()["errors"]


def test_the_cli_login_to_a_server_behind_it_binds_the_grant_too(tmp_path: Path, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    login_run = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert login_run.returncode == 0, login_run.stderr
    record = json.loads((project / ".agent-sdk" / "mcp-auth.json").read_text())["grants"]["docs"][resource.url]
    assert record["tokens"]["token_type"] == "DPoP" and record["dpop_key"]
    assert record["client"]["dpop_bound_access_tokens"] is True  # kept: a later login reuses the client bound
