"""DPoP where the upstream's authorization server asks for it (docs/oauth.md, "DPoP-bound grants").

oidc-provider registers every client with `dpop_bound_access_tokens: true` (RFC 9449 §5.2): it refuses a
token request without a DPoP proof. The audience-checking MCP server takes Bearer and DPoP tokens alike and
says nothing of DPoP, so only the registration response tells. A person signs in to the per-user connection
(no `dpop=` set) through the link their call is answered with: the grant is bound, and each call carries a
proof the server checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oauth.peers import AuthServer, ResourceServer, oidc_provider

from .conftest import Served
from .per_user import per_user_gateway
from .test_per_user_dpop import _signed_in_and_called


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
    answered = _signed_in_and_called(gateway, "alice", "whoami")
    assert (answered["isError"], answered.get("structuredContent")) == (False, {"result": "alice"}), answered
    after = resource.stats()
    assert after["dpop"] > before["dpop"]  # the token was bound, and the call came with a valid proof
    assert "invalid_grant" not in auth_server.stats()["errors"]
