"""`serve --oauth-issuer`: the gateway is an OAuth 2.1 protected resource (RFC 9728, RFC 6750, RFC 8707),
with oidc-provider (real, npm) as its authorization server.

A peer finds the authorization server from a 401's `WWW-Authenticate`, and the metadata says which
resource a token must be for; a token for `/v1/mcp/tools` from the trusted issuer lists and calls the
upstream's tools; a token without the required scope is 403 `insufficient_scope` naming it; a
static bearer token still admits its service beside OAuth; each person is their own principal.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oauth import parse_www_authenticate

from ..conftest import Served, assert_clean
from ..oauth_peers import Issuer, claims_for, mint, oauth_gateway, person_token, service_token

STATIC = "service-token-0123456789abcdef"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("oauth-gateway")
    flags = ("--oauth-scope", "mcp:tools", "--bearer-token", STATIC, "--oauth-audience", "api://gateway-app")
    with oauth_gateway(folder, idp.url, *flags) as served:
        yield served
    assert_clean(served.log_text(), [STATIC])


def _tools(gateway: Served) -> str:
    return f"{gateway.url}/v1/mcp/tools"


def test_the_metadata_names_the_issuer_and_each_endpoint_is_its_own_resource(gateway: Served, idp: Issuer) -> None:
    for suffix in ("", "/v1/mcp", "/v1/mcp/tools"):
        doc = httpx2.get(f"{gateway.url}/.well-known/oauth-protected-resource{suffix}").json()
        assert doc["resource"] == gateway.url + suffix
        assert doc["authorization_servers"] == [idp.url]
        assert doc["bearer_methods_supported"] == ["header"]
        assert doc["scopes_supported"] == ["mcp:tools"]
        assert doc["dpop_signing_alg_values_supported"]  # oidc-provider binds tokens to DPoP keys


def test_a_request_without_a_token_is_401_pointing_at_the_metadata(gateway: Served) -> None:
    answer = httpx2.post(_tools(gateway), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    challenge = parse_www_authenticate(answer.headers["www-authenticate"])
    assert challenge is not None
    assert challenge.resource_metadata == f"{gateway.url}/.well-known/oauth-protected-resource/v1/mcp/tools"
    assert challenge.error is None  # no token was sent
    session_api = httpx2.get(f"{gateway.url}/v1/sessions")
    assert session_api.status_code == 401
    assert (
        'resource_metadata="' + gateway.url + '/.well-known/oauth-protected-resource"'
        in session_api.headers["www-authenticate"]
    )


async def _list_and_call(url: str, token: str, mode: str) -> tuple[list[str], str]:
    async with httpx2.AsyncClient(timeout=30, headers={"authorization": f"Bearer {token}"}) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                tools = await client.list_tools()
                result = await client.call_tool("echo", {"text": "signed in"})
    block = result.content[0]
    assert block.type == "text"
    return sorted(t.name for t in tools.tools), block.text


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_token_for_the_tools_endpoint_lists_and_calls_on_both_generations(
    gateway: Served, idp: Issuer, mode: str
) -> None:
    token = service_token(idp.url, _tools(gateway))
    names, text = await _list_and_call(_tools(gateway), token, mode)
    assert "echo" in names
    assert "signed in" in text


@pytest.mark.anyio
async def test_a_token_without_the_required_scope_is_403_naming_the_scope(gateway: Served, idp: Issuer) -> None:
    token = service_token(idp.url, _tools(gateway), scope="mcp:admin")
    answer = httpx2.post(
        _tools(gateway),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 403
    challenge = parse_www_authenticate(answer.headers["www-authenticate"])
    assert challenge is not None
    assert (challenge.error, challenge.scope) == ("insufficient_scope", "mcp:tools")
    assert challenge.resource_metadata is not None


def test_a_static_bearer_token_still_admits_its_service(gateway: Served) -> None:
    answer = httpx2.get(f"{gateway.url}/v1/sessions", headers={"authorization": f"Bearer {STATIC}"})
    assert answer.status_code == 200


def _session_api(gateway: Served, token: str) -> httpx2.Client:
    return httpx2.Client(base_url=gateway.url, headers={"authorization": f"Bearer {token}"}, timeout=30)


def test_two_people_are_two_principals_and_neither_sees_the_others_sessions(gateway: Served, idp: Issuer) -> None:
    ada = person_token(idp.url, gateway.url, "ada")
    bob = person_token(idp.url, gateway.url, "bob")
    with _session_api(gateway, ada) as as_ada, _session_api(gateway, bob) as as_bob:
        created = as_ada.post("/v1/session", json={"message": "hello"})
        assert created.status_code in (200, 201), created.text
        session_id = created.json()["sessionId"]
        assert [s["sessionId"] for s in as_ada.get("/v1/sessions").json()["sessions"]] == [session_id]
        assert as_bob.get("/v1/sessions").json()["sessions"] == []
        assert as_bob.get(f"/v1/session/{session_id}").status_code in (403, 404)
        assert as_ada.get(f"/v1/session/{session_id}").status_code == 200
        # An authored tool called in Ada's session sees her principal: the id owns, the claims ride beside it.
        called = as_ada.post("/v1/tools/whoami", json={"input": {}, "sessionId": session_id})
        assert called.status_code == 200, called.text
        seen = called.json()["result"]
        assert seen["auth"].startswith("oauth:") and seen["kind"] == "oauth"
        assert (seen["subject"], seen["issuer"], seen["scopes"]) == ("ada", idp.url, ["mcp:tools"])
        assert seen["clientId"]
        assert as_bob.post("/v1/tools/whoami", json={"input": {}, "sessionId": session_id}).status_code in (403, 404)


def test_the_log_names_the_refusal_code_and_never_a_token(gateway: Served, idp: Issuer, tmp_path: Path) -> None:
    token = service_token(idp.url, "https://elsewhere.example/mcp")
    answer = httpx2.get(f"{gateway.url}/v1/sessions", headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    log = gateway.log_text()
    assert "refused GET /v1/sessions: invalid_token" in log
    assert_clean(log, [token, token.split(".")[1]])


def test_an_audience_named_by_oauth_audience_is_admitted_on_every_route(gateway: Served, idp: Issuer) -> None:
    # As Entra ID's v2 tokens name the API by its app's client id, not by a URL.
    token = mint(idp.key, claims_for(idp.url, "api://gateway-app"))
    assert httpx2.get(f"{gateway.url}/v1/sessions", headers={"authorization": f"Bearer {token}"}).status_code == 200
    other = mint(idp.key, claims_for(idp.url, "api://another-app"))
    assert httpx2.get(f"{gateway.url}/v1/sessions", headers={"authorization": f"Bearer {other}"}).status_code == 401


def test_the_flags_and_the_variables_reach_the_settings() -> None:
    from gateway.cli import build_parser
    from gateway.commands.serve import settings_from_args
    from gateway.settings import ServeSettings

    args = ["serve", "--oauth-issuer", "https://a.example", "--oauth-issuer", "https://b.example/realms/x"]
    args += ["--public-url", "https://gw.example", "--oauth-scope", "mcp:tools", "--oauth-audience", "api://x"]
    flagged = settings_from_args(build_parser().parse_args(args))
    assert flagged.oauth_issuers == ("https://a.example", "https://b.example/realms/x")
    assert (flagged.public_url, flagged.oauth_scopes, flagged.oauth_audiences) == (
        "https://gw.example",
        ("mcp:tools",),
        ("api://x",),
    )
    assert flagged.auth_mode == "oauth"
    env = {
        "AGENT_SDK_OAUTH_ISSUER": "https://a.example,https://b.example",
        "AGENT_SDK_PUBLIC_URL": "https://gw.example",
    }
    from_env = ServeSettings.from_env(env)
    assert from_env.oauth_issuers == ("https://a.example", "https://b.example")
    assert from_env.resource_url() == "https://gw.example"


def test_a_principal_and_its_identity_show_only_the_id() -> None:
    from gateway.auth.chain import Principal
    from gateway.auth.oauth_tokens import OAuthIdentity

    identity = OAuthIdentity(
        "https://idp.example", "alice@example.com", frozenset({"mcp:tools"}), "app", {"email": "alice@example.com"},
        frozenset({"https://gw.example"}), 0.0,
    )  # fmt: skip
    principal = Principal(identity.id, "oauth", oauth=identity)
    for shown in (repr(identity), repr(principal), str(principal)):
        assert identity.id in shown
        assert "alice" not in shown and "idp.example" not in shown
    assert (
        identity.id
        == OAuthIdentity("https://idp.example", "alice@example.com", frozenset(), None, {}, frozenset(), 0).id
    )
    assert (
        identity.id
        != OAuthIdentity("https://other.example", "alice@example.com", frozenset(), None, {}, frozenset(), 0).id
    )
