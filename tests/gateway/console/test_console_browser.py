"""The console in a real browser (Debian's chromium through Playwright) against a real `agent-sdk serve`
with a stdio connection (the "everything" reference server), a failing one (nothing listens at its URL)
and an OAuth one (the audience-checking MCP server behind oidc-provider).

Screenshots of each state go to `.artifacts/console/` (docs/console.md shows them).
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx2
import pytest
from playwright.sync_api import Page, Response, expect
from redis import Redis

from tests.browser import ARTIFACTS, chromium
from tests.conftest import free_port
from tests.oauth.flows.test_cli import stored_tokens
from tests.oauth.peers import AuthServer, ResourceServer
from tests.peers import node_bin
from tests.processes import running

from ..conftest import Served, assert_clean, make_project, serve, serving
from ..replicas import BEARER, OPERATOR, redis_server, replica

SHOTS = ARTIFACTS / "console"
ATTACKER = Path(__file__).resolve().parents[1] / "console_attacker"


def _connection(body: str) -> str:
    return f"from connections import define_connection\n\nconnection = define_connection({body})\n"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console")
    everything = str(node_bin("mcp-server-everything"))
    project = make_project(
        root / "project",
        {
            "everything": _connection(f"command={everything!r}, args=['stdio'], advertise_tools=True"),
            "broken": _connection(f"url='http://127.0.0.1:{free_port()}/mcp'"),
            "docs": _connection(f"url={resource.url!r}, oauth=True, advertise_tools=True"),
        },
        tools=False,
    )
    served = serve(project, root / "state")
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def _state(page: Page, name: str, state: str) -> None:
    expect(page.locator(f"#conn-{name}")).to_have_attribute("data-state", state, timeout=30_000)


def test_the_console_shows_every_state_runs_a_tool_and_logs_in_from_the_browser(
    gateway: Served, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    origin = gateway.url
    requests: list[str] = []
    loaded: list[Response] = []
    violations: list[str] = []
    pages: list[str] = []
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("response", lambda r: loaded.append(r))
        page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)

        with httpx2.Client(base_url=origin, timeout=30) as http:  # the same principal as the browser: loopback
            started = http.post("/v1/session", json={"message": "hello", "title": "before the login"})
            assert started.status_code == 200, started.text
            session_id = started.json()["sessionId"]
        page.goto(f"{origin}/", wait_until="load")
        _state(page, "everything", "ready")
        _state(page, "broken", "failing")
        _state(page, "docs", "needs_login")
        expect(page.locator("#conn-broken .cause")).to_contain_text("cannot connect")
        expect(page.locator("#conn-everything .tools")).to_contain_text("echo")
        expect(page.locator("#conn-docs .oauth")).to_contain_text("not logged in")
        expect(page.locator("#about")).to_contain_text("auth loopback-strict")  # from /v1/info
        expect(page.locator("#sessions")).to_contain_text(session_id, timeout=30_000)
        # Fail-closed: the turn fails while an advertised connection needs a login, and says why.
        expect(page.locator("#failures")).to_contain_text("connection 'docs'")
        expect(page.locator("#failures")).to_contain_text("no valid OAuth tokens")
        page.screenshot(path=str(SHOTS / "1-connections.png"), full_page=True)

        # The first load: the page, its script and style, and the first answer of every route it polls.
        first_load = sum(len(r.body()) for r in loaded)
        print(f"first load: {len(loaded)} responses, {first_load} bytes")
        assert first_load < 100_000, first_load
        assert all(url.startswith(origin + "/") for url in requests), requests
        assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0

        # Run a tool from the form its input schema generated.
        page.locator("#conn-everything button.run[data-tool='echo']").click()
        page.fill("#arg-message", "hello from the console")
        page.click("#run-submit")
        expect(page.locator("#run-result .result-text")).to_have_text("Echo: hello from the console", timeout=30_000)
        page.screenshot(path=str(SHOTS / "2-tool-run.png"), full_page=True)
        page.click("#run-close")
        # Number fields send numbers; an enum is a list; an image result is shown as an image.
        page.locator("#conn-everything button.run[data-tool='get-sum']").click()
        page.fill("#arg-a", "2")
        page.fill("#arg-b", "3.5")
        page.click("#run-submit")
        expect(page.locator("#run-result .result-text")).to_contain_text("5.5", timeout=30_000)
        page.click("#run-close")
        page.locator("#conn-everything button.run[data-tool='get-annotated-message']").click()
        page.select_option("#arg-messageType", label="success")
        page.check("#arg-includeImage")
        page.click("#run-submit")
        expect(page.locator("#run-result img")).to_have_count(1, timeout=30_000)
        assert page.locator("#run-result img").evaluate("img => img.complete && img.naturalWidth") > 0
        page.click("#run-close")

        # The calls just made, from /v1/metrics: a rate above zero and a p50 for the connection.
        charts = page.locator("#charts")
        expect(charts.locator("h3")).to_have_text(["everything"], timeout=30_000)
        labels = charts.locator(".chart .label")
        expect(labels.nth(0)).to_have_text(re.compile(r"calls: (0\.0[1-9]|0\.[1-9]|[1-9])"), timeout=30_000)
        expect(labels.nth(1)).to_have_text(re.compile(r"p50: ≤ \d+\.\d ms"))
        charts.screenshot(path=str(SHOTS / "6-calls.png"))

        # Log in to the OAuth connection: oidc-provider's login and consent pages, then our callback.
        _log_in(page, origin, "docs", shots=True)
        pages.append(page.content())
        page.click("text=Back to the console")
        _state(page, "docs", "ready")
        expect(page.locator("#conn-docs .oauth")).to_contain_text("logged in, expires in")
        expect(page.locator("#conn-docs .tools")).to_contain_text("echo")
        page.screenshot(path=str(SHOTS / "5-after-login.png"), full_page=True)
        pages.append(page.content())
    assert violations == []
    # Stored where `serve` reads (its state root's mcp-auth.json, 0600), and never shown on the page.
    store = gateway.state_root / "mcp-auth.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    tokens = stored_tokens(gateway.state_root)
    assert len(tokens) == 2  # the access and the refresh token of the one grant
    assert not any(token in content for token in tokens for content in pages)


def _log_in(page: Page, origin: str, name: str, *, shots: bool = False) -> None:
    """Press *Log in*, pass oidc-provider's login and consent pages, and land on the gateway's callback."""
    page.locator(f"#conn-{name} button.login").click()
    page.wait_for_url(lambda url: not url.startswith(origin), timeout=30_000)
    page.fill("input[name='login']", "operator")
    page.fill("input[name='password']", "any")
    if shots:
        page.screenshot(path=str(SHOTS / "3-authorization-server.png"))
    page.locator("button[type='submit']").first.click()
    page.locator("button[type='submit']").first.click()  # consent
    expect(page.locator("#login-result")).to_contain_text(f"{name} is logged in", timeout=30_000)
    assert urlsplit(page.url).path == "/v1/oauth/callback"
    if shots:
        page.screenshot(path=str(SHOTS / "4-logged-in.png"))


def test_a_page_on_another_origin_can_neither_read_the_console_data_nor_restart_a_connection(
    gateway: Served, tmp_path: Path
) -> None:
    port = free_port()
    site = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(ATTACKER)]
    with httpx2.Client(base_url=gateway.url, timeout=30) as http:
        opens = next(c["opens"] for c in http.get("/v1/connections").json()["connections"] if c["name"] == "everything")
        with running(site, port=port, what="the other origin's page"), chromium(tmp_path / "profile") as browser:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/index.html?gateway={gateway.url}")
            expect(page.locator("#read")).to_have_text("blocked", timeout=30_000)
            expect(page.locator("#act")).to_have_text("sent", timeout=30_000)
        after = next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "everything")
    assert after["opens"] == opens  # the no-cors POST reached the gateway and was refused: nothing restarted
    assert after["state"] == "ready"


def test_behind_bearer_tokens_the_page_asks_for_the_operator_token_and_then_shows_the_connections(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    token = "console-browser-token-0123456789"
    everything = str(node_bin("mcp-server-everything"))
    connections = {"everything": _connection(f"command={everything!r}, args=['stdio'], advertise_tools=True")}
    flags = ("--bearer-token", "console-browser-peer-0123456789", "--operator-token", token)
    with serving(tmp_path_factory, "console-bearer", connections, *flags) as served:
        with chromium(tmp_path / "profile") as browser:
            page = browser.new_page()
            page.goto(f"{served.url}/")
            expect(page.locator("#token-form")).to_be_visible(timeout=30_000)
            expect(page.locator("#conn-everything")).to_have_count(0)
            page.screenshot(path=str(SHOTS / "0-token.png"))
            page.fill("#token", token)
            page.click("#token-form button[type='submit']")
            _state(page, "everything", "ready")
            expect(page.locator("#who")).to_have_text("you: bearer (operator)")
            assert token not in page.content()


def test_a_refused_consent_or_a_replayed_redirect_stores_nothing(gateway: Served, auth_server: AuthServer) -> None:
    before = stored_tokens(gateway.state_root)
    with httpx2.Client(base_url=gateway.url, timeout=30) as http:
        started = http.post("/v1/connections/docs/login", json={})
        assert started.status_code == 200, started.text
        query = dict(parse_qsl(urlsplit(started.json()["authorizationUrl"]).query))
        assert query["redirect_uri"] == f"{gateway.url}/v1/oauth/callback"
        # The callback is at the origin the browser sees (its Origin), e.g. another name for this server.
        named = f"http://localhost:{gateway.port}"
        other = http.post("/v1/connections/docs/login", json={}, headers={"Origin": named, "Host": named[7:]})
        assert other.status_code == 200, other.text
        other_query = dict(parse_qsl(urlsplit(other.json()["authorizationUrl"]).query))
        assert other_query["redirect_uri"] == f"{named}/v1/oauth/callback"
        assert query["code_challenge_method"] == "S256"
        denied = {"error": "access_denied", "state": query["state"], "iss": auth_server.issuer}
        first = http.get("/v1/oauth/callback", params=denied)
        assert first.status_code == 400
        assert "denied" in first.text
        again = http.get("/v1/oauth/callback", params={**denied, "error": "", "code": "x"})
        assert again.status_code == 400
        assert "matches no login started from the console" in again.text  # a state is used once
    assert stored_tokens(gateway.state_root) == before


def test_a_browser_login_on_a_replica_is_stored_in_its_redis_not_on_its_disk(
    tmp_path: Path, resource: ResourceServer
) -> None:
    project = make_project(
        tmp_path / "project",
        {"docs": _connection(f"url={resource.url!r}, oauth=True, advertise_tools=True")},
        tools=False,
    )
    with redis_server(tmp_path / "redis") as redis:
        served = replica(project, tmp_path / "state", redis.url)
        try:
            with chromium(tmp_path / "profile") as browser:
                page = browser.new_page()
                page.goto(f"{served.url}/")
                page.fill("#token", OPERATOR)  # a login acts on the gateway: the operator's token
                page.click("#token-form button[type='submit']")
                _state(page, "docs", "needs_login")
                expect(page.locator("#conn-docs .oauth")).to_contain_text(f"store: redis://127.0.0.1:{redis.port}/0")
                _log_in(page, served.url, "docs")
                page.click("text=Back to the console")
                _state(page, "docs", "ready")  # the token sent from the tab's sessionStorage again
            keys = Redis.from_url(redis.url).keys("agent-sdk:mcp-oauth:docs:*")
            assert [k.decode() for k in keys] == [f"agent-sdk:mcp-oauth:docs:{resource.url}"]
            assert not (served.state_root / "mcp-auth.json").exists()
        finally:
            served.stop()
        assert_clean(served.log_text(), [BEARER, OPERATOR])
