"""Operators by OAuth: with `--operator-scope` and `--operator-claim`, a token from oidc-provider (real) that
carries the scope, or the claim, is an operator's; every other token of the same issuer is a peer's.

A peer gets 403 `operator_required` on the operator routes (restart, `/v1/failures`, `/v1/metrics`); the
operator can do each; tokens used one after the other (the gateway caches admitted tokens) never lend one
another their role.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from pydantic import ValidationError

from gateway.settings import ServeSettings

from ..conftest import Served, assert_clean, make_project, serve
from ..oauth_peers import Issuer, claims_for, mint, person_token, service_token

NOTES = Path(__file__).resolve().parents[3] / "examples" / "quickstart" / "servers" / "notes_server.py"
NOTES_CONNECTION = (
    "from connections import define_connection\n\n"
    f"connection = define_connection(command={sys.executable!r}, args=[{str(NOTES)!r}], advertise_tools=True)\n"
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("oauth-operators")
    project = make_project(root / "project", {"notes": NOTES_CONNECTION}, tools=False)
    claims = {"AGENT_SDK_OPERATOR_CLAIM": "groups=gateway-admins, realm_access.roles=gateway-admin"}
    served = serve(project, root / "state", "--oauth-issuer", idp.url, "--operator-scope", "mcp:admin", env=claims)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _opens(gateway: Served, token: str) -> int:
    with gateway.client(_bearer(token)) as http:
        listed = http.get("/v1/connections").json()["connections"]
    return next(c["opens"] for c in listed if c["name"] == "notes")


def _assert_operator_required(answer: httpx2.Response) -> None:
    assert answer.status_code == 403, answer.text
    body = answer.json()
    assert body["error"] == "operator_required"
    assert "--operator-scope" in body["message"], body["message"]


def _assert_peer(gateway: Served, token: str) -> None:
    with gateway.client(_bearer(token)) as http:
        looked = http.get("/v1/connections").json()
        assert looked["operator"] is False and looked["principal"] == "oauth"
        _assert_operator_required(http.post("/v1/connections/notes/restart", json={}))
        _assert_operator_required(http.get("/v1/failures"))
        _assert_operator_required(http.get("/v1/metrics"))
        assert http.post("/v1/tools/list_notes", json={"input": {}}).json()["ok"] is True  # a peer calls tools


def _assert_operator(gateway: Served, token: str) -> None:
    with gateway.client(_bearer(token)) as http:
        assert http.get("/v1/connections").json()["operator"] is True
        restarted = http.post("/v1/connections/notes/restart", json={})
        assert restarted.status_code == 200 and restarted.json()["restarted"] is True, restarted.text
        assert http.get("/v1/failures").json()["ok"] is True
        scraped = http.get("/v1/metrics")
        assert scraped.status_code == 200 and "agent_sdk_tool_calls_total" in scraped.text
        assert http.post("/v1/tools/list_notes", json={"input": {}}).json()["ok"] is True  # and calls tools


def test_a_token_with_the_operator_scope_is_an_operator_and_one_without_it_a_peer(gateway: Served, idp: Issuer) -> None:
    admin = person_token(idp.url, gateway.url, "carol", scope="mcp:tools mcp:admin")
    person = person_token(idp.url, gateway.url, "dave")
    service = service_token(idp.url, gateway.url)
    admin_service = service_token(idp.url, gateway.url, scope="mcp:tools mcp:admin")

    with gateway.client(_bearer(person)) as http:  # the child is up: a peer's own call opened it
        assert http.post("/v1/tools/list_notes", json={"input": {}}).json()["ok"] is True
    opens = _opens(gateway, person)
    _assert_peer(gateway, person)
    _assert_peer(gateway, service)
    assert _opens(gateway, person) == opens  # nothing was restarted under anyone's calls

    _assert_operator(gateway, admin)
    _assert_operator(gateway, admin_service)  # the same client as `service`: the token's scope decides
    assert _opens(gateway, person) == opens + 2
    # Neither role leaks: after the operators' requests, the peers' tokens are still peers'.
    _assert_peer(gateway, person)
    _assert_peer(gateway, service)
    assert _opens(gateway, person) == opens + 2


@pytest.mark.parametrize(
    ("claims", "operator"),
    [
        ({"groups": ["staff", "gateway-admins"]}, True),  # Okta, Entra: a list that holds the value
        ({"groups": "gateway-admins"}, True),
        ({"realm_access": {"roles": ["gateway-admin"]}}, True),  # Keycloak: a dotted path
        ({"groups": ["staff"]}, False),
        ({"groups": ["gateway-admins-not"]}, False),
        ({"realm_access": {"roles": "gateway-admins"}}, False),
        ({}, False),
    ],
)
def test_a_token_with_the_operator_claim_is_an_operator(
    gateway: Served, idp: Issuer, claims: dict[str, object], operator: bool
) -> None:
    token = mint(idp.key, claims_for(idp.url, gateway.url, sub="erin", **claims))  # signed with the issuer's key
    with gateway.client(_bearer(token)) as http:
        assert http.get("/v1/connections").json()["operator"] is operator
        failures = http.get("/v1/failures")
    if operator:
        assert failures.status_code == 200, failures.text
    else:
        _assert_operator_required(failures)


def test_operator_scopes_and_claims_need_an_issuer_and_a_claim_needs_name_and_value() -> None:
    with pytest.raises(ValidationError, match="need --oauth-issuer"):
        ServeSettings.from_env({"AGENT_SDK_OPERATOR_SCOPE": "mcp:admin"})
    with pytest.raises(ValidationError, match="need --oauth-issuer"):
        ServeSettings.from_env({}, operator_claims=("groups=admins",))
    with pytest.raises(ValidationError, match="is not NAME=VALUE"):
        ServeSettings.from_env({}, oauth_issuers=("https://idp.example.com",), operator_claims=("groups",))
    settings = ServeSettings.from_env(
        {"AGENT_SDK_OPERATOR_CLAIM": "groups=a b, roles=admin"}, oauth_issuers=("https://idp.example.com",)
    )
    assert settings.operator_claims == ("groups=a b", "roles=admin")
