"""Browser sign-in on an OAuth gateway, in Debian's chromium (Playwright) against real components: oidc-provider
as the company IdP (and as the upstream's authorization server), the audience-checking `mcp` resource server
as a `grants="per_principal"` upstream, and `agent-sdk serve --oauth-issuer --operator-claim groups=...`.

- a person opens the sign-in link their agent's call was answered with: the gateway signs them in with the
  IdP, checks they are the person the link was issued to, runs the upstream login, and says so; their next
  call goes through as them;
- a link forwarded to someone else is refused with a sentence, and stays good for its owner;
- a peer's own MCP token (for `/v1/mcp/tools`, the resource its 401 named) opens its link too;
- the console signs an operator in (a `groups` claim) and refuses a person who is not one; a static
  operator token still works;
- two replicas behind nginx (Redis, one deployment key) both accept the cookie one of them set.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from playwright.sync_api import expect

from gateway.auth.browser_sessions import safe_next
from gateway.state.request_state import RequestStates
from tests.browser import ARTIFACTS, chromium, signed_in
from tests.conftest import free_port
from tests.oauth.peers import AuthServer, ResourceServer, oidc_provider, resource_server

from ..conftest import Served, assert_clean, serve
from ..oauth_peers import person_token
from ..per_user import OPERATOR, call_body, per_user_project, sign_in_url_in, text_of
from ..replicas import STATE_KEY, nginx_front, redis_server

pytestmark = [pytest.mark.peers, pytest.mark.timeout(240)]

SHOTS = ARTIFACTS / "console"
ADMINS = {"carol": ["staff", "gateway-admins"], "dave": ["staff"]}
CLAIM = "groups=gateway-admins"


CLIENT_PORT = free_port()
"""The port of the gateway whose browser sign-in client is registered at the IdP in advance (`--oidc-client-id`)."""
CLIENT = {
    "client_id": "gateway-console",
    "client_secret": "gateway-console-secret-0123456789",
    "redirect_uris": [f"http://127.0.0.1:{CLIENT_PORT}/v1/oauth/callback"],
    "grant_types": ["authorization_code"],
    "response_types": ["code"],
}


@pytest.fixture(scope="module")
def company_idp() -> Iterator[AuthServer]:
    with oidc_provider(3600, groups=ADMINS, clients=[CLIENT]) as server:
        yield server


@pytest.fixture(scope="module")
def upstream(company_idp: AuthServer) -> Iterator[ResourceServer]:
    with resource_server(company_idp.issuer) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, company_idp: AuthServer, upstream: ResourceServer
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("oauth-browser")
    project = per_user_project(root / "project", upstream.url)
    env = {"AGENT_SDK_OPERATOR_TOKEN": OPERATOR}
    served = serve(project, root / "state", "--oauth-issuer", company_idp.issuer, "--operator-claim", CLAIM, env=env)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), [OPERATOR])


def _whoami(gateway: Served, token: str) -> dict[str, Any]:
    """`tools/call whoami` on `/v1/mcp/tools` (2026-07-28) with a person's MCP token; the result."""
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "whoami",
        "authorization": f"Bearer {token}",
    }
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(f"{gateway.url}/v1/mcp/tools", json=call_body("whoami"), headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def _link_for(gateway: Served, idp: str, person: str) -> tuple[str, str]:
    """`person`'s MCP token and the sign-in link their first call is answered with."""
    token = person_token(idp, f"{gateway.url}/v1/mcp/tools", person)
    result = _whoami(gateway, token)
    assert result["isError"] is True, result
    return token, sign_in_url_in(text_of(result))


def test_a_person_signs_in_through_the_link_their_agent_was_given_and_then_calls_as_themselves(
    gateway: Served, company_idp: AuthServer, tmp_path: Path
) -> None:
    token, link = _link_for(gateway, company_idp.issuer, "alice")
    with signed_in(tmp_path / "alice", link, company_idp.issuer, "alice") as page:
        expect(page.locator("#login-result")).to_have_text("Signed in to docs; go back to your agent.")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "oauth-signed-in.png"))
        cookie = next(c for c in page.context.cookies() if c["name"] == "agent-sdk-session")
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax" and cookie["secure"] is False
    answered = _whoami(gateway, token)
    assert answered["isError"] is False and text_of(answered) == "alice", answered


def test_a_forwarded_link_is_refused_with_a_sentence_and_stays_good_for_its_owner(
    gateway: Served, company_idp: AuthServer, tmp_path: Path
) -> None:
    token, link = _link_for(gateway, company_idp.issuer, "bob")
    with signed_in(tmp_path / "erin", link, company_idp.issuer, "erin") as page:
        result = page.locator("#login-result")
        expect(result).to_contain_text("issued to someone else")
        expect(result).to_contain_text("Call the tool again from your own agent")
        assert page.title() == "agent-sdk login"
    with signed_in(tmp_path / "bob", link, company_idp.issuer, "bob") as page:
        expect(page.locator("#login-result")).to_have_text("Signed in to docs; go back to your agent.")
    assert text_of(_whoami(gateway, token)) == "bob"


def test_a_peers_own_mcp_token_opens_its_sign_in_link(gateway: Served, company_idp: AuthServer) -> None:
    token, link = _link_for(gateway, company_idp.issuer, "frank")
    with httpx2.Client(timeout=30.0) as http:
        opened = http.get(link, headers={"authorization": f"Bearer {token}"})
    assert opened.status_code == 302, opened.text
    assert opened.headers["location"].startswith(f"{company_idp.issuer}/auth?"), opened.headers["location"]


def test_the_console_signs_an_operator_in_and_refuses_a_person_who_is_not_one(
    gateway: Served, company_idp: AuthServer, tmp_path: Path
) -> None:
    with httpx2.Client(timeout=30.0) as http:
        shown = http.get(f"{gateway.url}/", follow_redirects=False)
        assert shown.status_code == 302 and shown.headers["location"].startswith("/v1/oauth/browser?next=")
    with signed_in(tmp_path / "carol", f"{gateway.url}/", company_idp.issuer, "carol") as page:
        expect(page.locator("#who")).to_have_text("you: oauth (operator)", timeout=30_000)
        expect(page.locator("#connections")).to_contain_text("docs")
        page.screenshot(path=str(SHOTS / "oauth-operator.png"), full_page=True)
        signed_out = page.request.post(f"{gateway.url}/v1/oauth/browser/sign-out")
        assert signed_out.status == 200 and signed_out.json()["signedOut"] is True
        assert not any(c["name"] == "agent-sdk-session" for c in page.context.cookies())
        assert page.request.get(f"{gateway.url}/v1/connections").status == 401
    with signed_in(tmp_path / "dave", f"{gateway.url}/", company_idp.issuer, "dave") as page:
        refusal = page.locator("#login-result")
        expect(refusal).to_contain_text("You are signed in as dave, who is not an operator of this gateway")
        expect(refusal).to_contain_text(f"--operator-claim {CLAIM}")
        failures = page.request.get(f"{gateway.url}/v1/failures")  # the cookie is a peer's credential
        assert failures.status == 403 and failures.json()["error"] == "operator_required"
        expect(refusal).to_contain_text("An operator with an --operator-token opens /?operator-token instead.")
    with gateway.client({"authorization": f"Bearer {OPERATOR}"}) as http:  # a static operator token still works
        assert http.get("/v1/connections").json()["operator"] is True
    with chromium(tmp_path / "token") as browser:  # and in the page, without the IdP
        page = browser.new_page()
        page.goto(f"{gateway.url}/?operator-token")
        expect(page.locator("#token-form")).to_be_visible(timeout=30_000)
        page.fill("#token", OPERATOR)
        page.click("#token-form button[type='submit']")
        expect(page.locator("#who")).to_have_text("you: bearer (operator)", timeout=30_000)
        assert not any(c["name"] == "agent-sdk-session" for c in browser.cookies())


def test_a_forged_or_foreign_cookie_admits_nobody_and_the_page_signs_in_again(gateway: Served) -> None:
    foreign = RequestStates(os.urandom(32)).seal_browser("not-a-token", time.time() + 600)  # another deployment's key
    for cookie in ("agent-sdk.browser1.AAAA", foreign):
        with gateway.client({"cookie": f"agent-sdk-session={cookie}"}, follow_redirects=False) as http:
            assert http.get("/v1/connections").status_code == 401
            page = http.get("/v1/oauth/sign-in?ticket=x")
            assert page.status_code == 302 and page.headers["location"].startswith("/v1/oauth/browser?next=")


@pytest.mark.parametrize(
    ("asked", "sent_to"),
    [
        ("/", "/"),
        ("/v1/oauth/sign-in?ticket=x", "/v1/oauth/sign-in?ticket=x"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        (None, "/"),
    ],
)
def test_after_the_sign_in_a_browser_goes_back_to_a_page_of_this_gateway_only(asked: str | None, sent_to: str) -> None:
    assert safe_next(asked) == sent_to


def test_two_replicas_behind_nginx_accept_the_cookie_one_of_them_set(
    tmp_path: Path, company_idp: AuthServer, upstream: ResourceServer
) -> None:
    project = per_user_project(tmp_path / "project", upstream.url)
    with redis_server(tmp_path / "redis") as redis:
        ports = [free_port() for _ in range(2)]
        with nginx_front(tmp_path / "nginx", ports) as front:
            env = {"AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_STATE_KEY": STATE_KEY}
            flags = ("--oauth-issuer", company_idp.issuer, "--operator-claim", CLAIM, "--public-url", front)
            replicas = [serve(project, tmp_path / f"state-{p}", *flags, env=env, port=p) for p in ports]
            try:
                with signed_in(tmp_path / "carol", f"{front}/", company_idp.issuer, "carol") as page:
                    expect(page.locator("#who")).to_have_text("you: oauth (operator)", timeout=30_000)
                    cookie = next(c for c in page.context.cookies() if c["name"] == "agent-sdk-session")
                for served in replicas:
                    with served.client({"cookie": f"agent-sdk-session={cookie['value']}"}) as http:
                        listed = http.get("/v1/connections")
                        assert listed.status_code == 200, listed.text
                        assert listed.json()["operator"] is True
                        assert http.get("/v1/failures").status_code == 200
            finally:
                for served in replicas:
                    served.stop()
            for served in replicas:
                assert_clean(served.log_text(), [cookie["value"]])


def test_a_client_registered_at_the_idp_in_advance_signs_the_operator_in(
    tmp_path: Path, company_idp: AuthServer, upstream: ResourceServer
) -> None:
    project = per_user_project(tmp_path / "project", upstream.url)
    flags = ("--oauth-issuer", company_idp.issuer, "--operator-claim", CLAIM, "--oidc-client-id", CLIENT["client_id"])
    secret = str(CLIENT["client_secret"])
    served = serve(project, tmp_path / "state", *flags, env={"AGENT_SDK_OIDC_CLIENT_SECRET": secret}, port=CLIENT_PORT)
    try:
        registrations = company_idp.stats()["registrations"]
        with signed_in(tmp_path / "carol", f"{served.url}/", company_idp.issuer, "carol") as page:
            expect(page.locator("#who")).to_have_text("you: oauth (operator)", timeout=30_000)
        assert company_idp.stats()["registrations"] == registrations  # no dynamic registration
    finally:
        served.stop()
    assert_clean(served.log_text(), [secret])
