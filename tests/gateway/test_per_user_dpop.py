"""DPoP toward upstreams only where the upstream asks for it (docs/oauth.md, "DPoP").

oidc-provider advertises DPoP (`dpop_signing_alg_values_supported`) and binds any token whose request
carries a proof. An MCP server written with the `mcp` Python SDK's own server-side auth takes Bearer tokens
only and says nothing of DPoP: a person signed in to it through the gateway calls it without configuration,
and with `Authorization: Bearer`. The audience-checking resource server of the other tests takes both; with
`dpop=True` its grants are bound, and every call carries a proof."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.oauth.peers import AuthServer, ResourceServer, sdk_bearer_server

from .conftest import Served, assert_clean, make_project, serve
from .per_user import PEERS, call_body, modern_headers, peer_env, sign_in, sign_in_url_in, text_of

ACCESS_TOKEN_TTL = 3600


@pytest.fixture(scope="module")
def sdk_upstream(auth_server: AuthServer) -> Iterator[ResourceServer]:
    with sdk_bearer_server(auth_server.issuer) as server:
        yield server


def _project(root: Path, **urls: tuple[str, str]) -> Path:
    bodies = {
        name: (
            "from connections import define_connection\n\n"
            f"connection = define_connection(url={url!r}, oauth=True, grants='per_principal', "
            f"advertise_tools=True{extra})\n"
        )
        for name, (url, extra) in urls.items()
    }
    return make_project(root, bodies, tools=False)


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, sdk_upstream: ResourceServer, resource: ResourceServer
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("per-user-dpop")
    project = _project(
        root / "project", docs=(sdk_upstream.url, ""), bound=(resource.url, ", dpop=True, allow_tools=['echo']")
    )
    served = serve(project, root / "state", env=peer_env())
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


def _call(gateway: Served, name: str, tool: str) -> dict[str, Any]:
    """`tools/call` of `tool` on `/v1/mcp/tools` as `name` (2026-07-28); the result (a JSON-RPC error as an
    error result carrying its JSON)."""
    body = call_body(tool)
    body["params"]["arguments"] = {"text": "hi"} if tool == "echo" else {}
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=modern_headers(name, tool))
    if "error" in answer.json():
        return {"isError": True, "content": [{"type": "text", "text": json.dumps(answer.json()["error"])}]}
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def _signed_in_and_called(gateway: Served, name: str, tool: str) -> dict[str, Any]:
    """Call `tool` as `name`, signing in through each sign-in URL the answers carry; the first answer without one."""
    for _ in range(3):
        answered = _call(gateway, name, tool)
        if not answered["isError"] or "sign_in_required" not in text_of(answered):
            return answered
        page = sign_in(sign_in_url_in(text_of(answered)), name)
        assert page.status_code == 200 and "Signed in" in page.text, page.text
    raise AssertionError(f"{name} was asked to sign in again and again")


def test_an_sdk_server_with_bearer_only_auth_works_per_person_without_configuration(
    gateway: Served, sdk_upstream: ResourceServer, auth_server: AuthServer
) -> None:
    refreshes = auth_server.stats()["grants"].get("refresh_token", 0)
    answered = _signed_in_and_called(gateway, "alice", "whoami")
    assert (answered["isError"], answered.get("structuredContent")) == (False, {"result": "alice"}), answered
    again = _call(gateway, "alice", "whoami")
    assert again["structuredContent"] == {"result": "alice"}
    stats = httpx2.get(f"{sdk_upstream.base}/_control/stats").json()
    assert stats["whoami"] == {"alice": 2}
    assert "dpop" not in stats["schemes"]  # plain Bearer, as the server's metadata and challenge ask
    assert auth_server.stats()["grants"].get("refresh_token", 0) == refreshes  # nothing refreshed


def test_dpop_true_binds_the_grant_and_every_call_carries_a_proof(gateway: Served, resource: ResourceServer) -> None:
    before = resource.stats()
    answered = _signed_in_and_called(gateway, "bob", "echo")
    assert (answered["isError"], answered["structuredContent"]) == (False, {"result": "hi"}), answered
    after = resource.stats()
    assert after["dpop"] > before["dpop"]  # the resource checked a proof for the bound token
    assert after["subjects"]["bob"] > before["subjects"].get("bob", 0)


def test_a_call_asks_for_the_sign_in_of_its_own_connection_not_another_ones(gateway: Served) -> None:
    # dave has signed in to neither per-user connection; earlier listings (alice's, bob's) say whoami is docs's.
    asked = _call(gateway, "dave", "whoami")
    assert asked["isError"] is True
    assert "connection 'docs'" in text_of(asked) and "'bound'" not in text_of(asked), text_of(asked)
    answered = _signed_in_and_called(gateway, "dave", "whoami")  # one sign-in, to docs, is all it takes
    assert answered.get("structuredContent") == {"result": "dave"}, answered


def test_a_401_caused_by_the_binding_says_so_and_refreshes_at_most_once(
    tmp_path: Path, sdk_upstream: ResourceServer, auth_server: AuthServer
) -> None:
    # dpop=True toward a server that takes Bearer only: oidc-provider binds the grant, the server refuses it.
    project = _project(tmp_path / "project", docs=(sdk_upstream.url, ", dpop=True"))
    served = serve(project, tmp_path / "state", env=peer_env())
    try:
        refused = _signed_in_and_called(served, "carol", "whoami")
        before = auth_server.stats()["grants"].get("refresh_token", 0)
        again = _call(served, "carol", "whoami")
        refreshes = auth_server.stats()["grants"].get("refresh_token", 0) - before
    finally:
        served.stop()
    assert refreshes <= 1, refreshes
    for answered in (refused, again):
        text = text_of(answered)
        assert answered["isError"] is True
        assert "DPoP" in text and "dpop=True" in text, text  # the binding is named, and the setting to change
        assert "sign_in_required" not in text  # a new sign-in would be bound again: not offered
    assert_clean(served.log_text(), list(PEERS.values()))
