"""Connections that act with each caller's own credential, end to end against oidc-provider (real, twice: the
enterprise IdP and an upstream's authorization server, their grants registered through its own extension
API) and audience-checking MCP servers that report the subject they saw (`caller_world.py`):

- token exchange (RFC 8693): each person reaches the upstream as themself, one exchange per person (cached),
  and the person's own token never reaches the upstream; the IdP's refusals (`invalid_grant`,
  `invalid_target`) and a caller with no OAuth token fail closed with a sentence naming the connection;
- ID-JAG: the IdP's assertion redeemed at the upstream's authorization server (no browser step), and an
  ID-JAG for another audience refused before it is sent anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.oauth.flows.test_cli import agent_sdk

from ..caller_world import (
    ELSEWHERE,
    JWT_BEARER,
    SECRETS,
    TOKEN_EXCHANGE,
    UNTRUSTED_CLIENT,
    World,
    call,
    caller_connection,
    caller_world,
    digest,
    text_of,
)
from ..conftest import Served, assert_clean, make_project, serve
from ..oauth_peers import person_token

BEARER = "static-bearer-token-0123456789abcdef"
OPERATOR = "caller-operator-token-0123456789abcdef"


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with caller_world(gateways=3) as found:
        yield found


def _gateway(
    world: World, tmp_path_factory: pytest.TempPathFactory, index: int, connections: dict[str, str]
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp(f"callers-{index}")
    project = make_project(root / "project", connections, tools=False)
    served = serve(
        project,
        root / "state",
        "--oauth-issuer",
        world.idp.issuer,
        "--bearer-token",
        BEARER,
        env={**SECRETS, "AGENT_SDK_OPERATOR_TOKEN": OPERATOR},
        port=world.gateway_ports[index],
    )
    try:
        yield served
    finally:
        served.stop()
    log = served.log_text()
    assert_clean(log, list(SECRETS.values()))


@pytest.fixture(scope="module")
def exchanging(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway whose connection `direct` exchanges each caller's token at the IdP."""
    connections = {
        "direct": caller_connection(
            world.direct.url, grant="token_exchange", client_id="gateway", client_secret_env="GATEWAY_IDP_SECRET"
        )
    }
    yield from _gateway(world, tmp_path_factory, 0, connections)


@pytest.fixture(scope="module")
def asserting(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway whose connection `behind` gets an ID-JAG from the IdP and redeems it at the upstream's server."""
    connections = {
        "behind": caller_connection(
            world.behind.url,
            grant="id_jag",
            client_id="gateway-at-upstream",
            client_secret_env="GATEWAY_UPSTREAM_SECRET",
            idp_client_id="gateway",
            idp_client_secret_env="GATEWAY_IDP_SECRET",
        )
    }
    yield from _gateway(world, tmp_path_factory, 1, connections)


def test_each_person_reaches_the_upstream_as_themself_through_token_exchange(world: World, exchanging: Served) -> None:
    resource = world.gateway_resource(0)
    ada, bob = person_token(world.idp.issuer, resource, "ada"), person_token(world.idp.issuer, resource, "bob")
    exchanges = world.idp.stats()["grants"].get(TOKEN_EXCHANGE, 0)
    for _ in range(3):
        assert text_of(call(exchanging.url, ada, "whoami")) == "ada"
        assert text_of(call(exchanging.url, bob, "whoami")) == "bob"
    assert text_of(call(exchanging.url, ada, "whoami", version="2026-07-28")) == "ada"
    # One exchange per person: the upstream token is kept until shortly before it expires.
    assert world.idp.stats()["grants"][TOKEN_EXCHANGE] - exchanges == 2
    seen = world.direct.stats()
    assert set(seen["subjects"]) == {"ada", "bob"}
    # What reached the upstream was the exchanged token, never the person's own.
    assert digest(ada) not in seen["digests"] and digest(bob) not in seen["digests"]


def test_a_subject_the_idp_refuses_fails_the_call_with_invalid_grant(world: World, exchanging: Served) -> None:
    mallory = person_token(world.idp.issuer, world.gateway_resource(0), "mallory")
    answer = call(exchanging.url, mallory, "whoami")
    message = answer["error"]["message"] if "error" in answer else answer["result"]["content"][0]["text"]
    assert "'direct'" in message and "invalid_grant" in message, message
    assert f"{world.idp.issuer}/token refused the request" in message
    assert "mallory" not in world.direct.stats()["subjects"]


def test_an_exchange_is_kept_per_token_so_a_refused_token_of_the_same_person_fails(
    world: World, exchanging: Served
) -> None:
    resource = world.gateway_resource(0)
    trusted = person_token(world.idp.issuer, resource, "carol")
    assert text_of(call(exchanging.url, trusted, "whoami")) == "carol"
    # The same person through a client the IdP will not exchange for: a new exchange, refused, and the call
    # fails; the upstream token made from the other client's token is not reused.
    exchanges = world.idp.stats()["grants"].get(TOKEN_EXCHANGE, 0)
    refused = world.idp.stats()["errors"].get("invalid_grant", 0)
    untrusted = person_token(world.idp.issuer, resource, "carol", client_name=UNTRUSTED_CLIENT)
    answer = call(exchanging.url, untrusted, "whoami")
    message = answer["error"]["message"] if "error" in answer else answer["result"]["content"][0]["text"]
    assert "'direct'" in message and "invalid_grant" in message, message
    assert world.idp.stats()["errors"]["invalid_grant"] - refused == 1
    # The trusted token still works from its own cached exchange, and the refused one keeps failing.
    assert text_of(call(exchanging.url, trusted, "whoami")) == "carol"
    assert world.idp.stats()["grants"].get(TOKEN_EXCHANGE, 0) == exchanges
    again = call(exchanging.url, untrusted, "whoami")
    assert "invalid_grant" in (again["error"]["message"] if "error" in again else again["result"]["content"][0]["text"])


def _identities_closed(served: Served) -> float:
    scraped = httpx2.get(f"{served.url}/v1/metrics", headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=30)
    assert scraped.status_code == 200, scraped.text
    lines = [line for line in scraped.text.splitlines() if line.startswith("agent_sdk_identity_clients_closed_total{")]
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if 'connection="direct"' in line)


def test_two_clients_of_one_person_keep_their_own_upstream_identity(world: World, exchanging: Served) -> None:
    resource = world.gateway_resource(0)
    laptop = person_token(world.idp.issuer, resource, "dora", client_name="laptop")
    phone = person_token(world.idp.issuer, resource, "dora", client_name="phone")
    closed = _identities_closed(exchanging)
    exchanges = world.idp.stats()["grants"].get(TOKEN_EXCHANGE, 0)
    for _ in range(3):  # alternating: neither token's upstream session is retired for the other's
        assert text_of(call(exchanging.url, laptop, "whoami")) == "dora"
        assert text_of(call(exchanging.url, phone, "whoami")) == "dora"
    assert world.idp.stats()["grants"][TOKEN_EXCHANGE] - exchanges == 2  # one exchange per token
    assert _identities_closed(exchanging) == closed


def test_a_caller_without_an_oauth_token_is_refused_not_served_bare(exchanging: Served, world: World) -> None:
    answer = call(exchanging.url, BEARER, "whoami")
    message = answer["error"]["message"] if "error" in answer else answer["result"]["content"][0]["text"]
    assert "'direct'" in message and "caller's own OAuth token" in message, message


def test_id_jag_reaches_the_upstream_behind_its_own_authorization_server(world: World, asserting: Served) -> None:
    resource = world.gateway_resource(1)
    ada, bob = person_token(world.idp.issuer, resource, "ada"), person_token(world.idp.issuer, resource, "bob")
    redeemed = world.upstream_as.stats()["grants"].get(JWT_BEARER, 0)
    issued = world.idp.stats()["idJags"]
    for _ in range(2):
        assert text_of(call(asserting.url, ada, "whoami")) == "ada"
        assert text_of(call(asserting.url, bob, "whoami")) == "bob"
    assert world.idp.stats()["idJags"] - issued == 2
    assert world.upstream_as.stats()["grants"][JWT_BEARER] - redeemed == 2
    seen = world.behind.stats()
    assert {"ada", "bob"} <= set(seen["subjects"])
    assert digest(ada) not in seen["digests"] and digest(bob) not in seen["digests"]


def test_an_upstream_the_idp_issues_nothing_for_and_an_id_jag_for_another_audience_are_refused(
    world: World, tmp_path_factory: pytest.TempPathFactory
) -> None:
    connections = {
        # `behind` trusts only its own authorization server: the IdP issues no token for it (invalid_target).
        "untargeted": caller_connection(
            world.behind.url, grant="token_exchange", client_id="gateway", client_secret_env="GATEWAY_IDP_SECRET"
        ),
        # The IdP answers this client with an ID-JAG for another authorization server than the upstream's.
        "misdirected": caller_connection(
            world.behind.url,
            grant="id_jag",
            client_id="gateway-at-upstream",
            client_secret_env="GATEWAY_UPSTREAM_SECRET",
            idp_client_id="gateway-misdirected",
            idp_client_secret_env="GATEWAY_MISDIRECTED_SECRET",
        ),
    }
    redeemed = world.upstream_as.stats()["grants"].get(JWT_BEARER, 0)
    reached = world.behind.stats()["ok"]
    for served in _gateway(world, tmp_path_factory, 2, connections):
        ada = person_token(world.idp.issuer, world.gateway_resource(2), "ada")
        answer = call(served.url, ada, "whoami")
        # Fail closed, naming every connection and each one's cause.
        assert "connections 'misdirected', 'untargeted' could not be listed" in answer["error"]["message"]
        causes = {e["connection"]: e["message"] for e in answer["error"]["data"]["connectionErrors"]}
        assert "invalid_target" in causes["untargeted"], causes
        assert "this server issues no tokens for" in causes["untargeted"]
        assert "id_jag_refused" in causes["misdirected"] and ELSEWHERE in causes["misdirected"]
        assert "it was not sent there" in causes["misdirected"]
    assert world.behind.stats()["ok"] == reached  # nothing reached the upstream
    assert world.upstream_as.stats()["grants"].get(JWT_BEARER, 0) == redeemed


def test_the_cli_has_no_login_to_run_for_a_callers_own_credential(tmp_path: Path) -> None:
    definition = caller_connection(
        "https://docs.example.com/mcp", grant="token_exchange", client_id="gateway", client_secret_env="X_SECRET"
    )
    project = make_project(tmp_path / "project", {"docs": definition}, tools=False)
    refused = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--no-browser")
    assert refused.returncode != 0
    assert "acts with each caller's own OAuth token (grant='token_exchange')" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
