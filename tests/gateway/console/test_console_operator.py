"""The console as an operator's tool, in Debian's chromium against a real `agent-sdk serve` with the
"everything" reference server over stdio and the audience-checking MCP server behind oidc-provider:
the Run form refuses an empty required number (get-sum once ran as 0 + 0), the per-tool table,
each connection's details, who holds sessions, a restart recorded as an action and not a failure,
the recent log, and a logout that forgets the grant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Page, expect
from prometheus_client.parser import text_string_to_metric_families

from tests.browser import ARTIFACTS, chromium
from tests.gateway.console.test_console_browser import _log_in  # pyright: ignore[reportPrivateUsage]
from tests.oauth.flows.test_cli import stored_tokens
from tests.oauth.peers import ResourceServer
from tests.peers import node_bin

from ..conftest import Served, assert_clean, make_project, serve

pytestmark = [pytest.mark.peers]

SHOTS = ARTIFACTS / "console"


def _connection(body: str) -> str:
    return f"from connections import define_connection\n\nconnection = define_connection({body})\n"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-operator")
    everything = str(node_bin("mcp-server-everything"))
    project = make_project(
        root / "project",
        {
            "everything": _connection(f"command={everything!r}, args=['stdio'], advertise_tools=True"),
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


def _get_sum_calls(served: Served) -> float:
    with served.client() as http:
        text = http.get("/v1/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "agent_sdk_tool_calls_total" and s.labels.get("tool") == "get-sum"
    )


def _state(page: Page, name: str, state: str) -> None:
    expect(page.locator(f"#conn-{name}")).to_have_attribute("data-state", state, timeout=30_000)


def test_the_run_form_refuses_an_empty_required_number_instead_of_sending_zero(gateway: Served, tmp_path: Path) -> None:
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.goto(f"{gateway.url}/?refresh=1")
        _state(page, "everything", "ready")
        page.locator("#conn-everything button.run[data-tool='get-sum']").click()
        page.fill("#arg-b", "3")
        page.click("#run-submit")
        expect(page.locator("#run-result .form-problem")).to_have_text(
            "Not sent: a is required: enter a number", timeout=10_000
        )
        assert page.locator("#arg-a").get_attribute("aria-invalid") == "true"
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "8-form-refused.png"))
        assert _get_sum_calls(gateway) == 0  # nothing reached the tool
        page.fill("#arg-a", "2")
        page.click("#run-submit")
        expect(page.locator("#run-result .result-text")).to_contain_text("5", timeout=30_000)
        assert page.locator("#arg-a").get_attribute("aria-invalid") is None
        page.click("#run-close")
        # The per-tool table: the one call, no error, a latency.
        row = page.locator("#tool-table tr[data-tool='get-sum']")
        expect(row.locator("td.calls")).to_have_text("1", timeout=30_000)
        expect(row.locator("td.errors")).to_have_text("0")
    assert _get_sum_calls(gateway) == 1


def test_details_principals_actions_the_log_and_a_logout(gateway: Served, tmp_path: Path) -> None:
    with httpx2.Client(base_url=gateway.url, timeout=30) as http:  # the browser's principal: loopback
        started = http.post("/v1/session", json={"message": "hello"})
        assert started.status_code == 200, started.text
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.goto(f"{gateway.url}/?refresh=1")
        _state(page, "everything", "ready")
        details = page.locator("#conn-everything .details")
        expect(details).to_contain_text("opens 1", timeout=30_000)
        expect(details).to_contain_text("pid ")
        expect(details).to_contain_text("protocol 20")
        expect(page.locator("#principals")).to_contain_text("loopback", timeout=30_000)
        assert int(page.locator("#principals td.sessions").first.text_content() or "0") >= 1

        # A restart is an action: in the actions, reopened as an INFO line, and not among the failures.
        page.locator("#conn-everything button.restart").click()
        expect(page.locator("#actions")).to_contain_text("restart connection 'everything'", timeout=30_000)
        expect(details).to_contain_text("opens 2", timeout=30_000)
        expect(page.locator("#log")).to_contain_text("after an operator's restart", timeout=30_000)
        expect(page.locator("#failures")).not_to_contain_text("connection 'everything': reopening")

        # Log in through oidc-provider's pages, then log out from the console: the grant is gone.
        _log_in(page, gateway.url, "docs")
        page.click("text=Back to the console")
        _state(page, "docs", "ready")
        assert stored_tokens(gateway.state_root)
        page.locator("#conn-docs button.logout").click()
        _state(page, "docs", "needs_login")
        expect(page.locator("#conn-docs button.logout")).to_have_count(0)
        expect(page.locator("#actions")).to_contain_text("logout connection 'docs'", timeout=30_000)
        expect(page.locator("#actions")).to_contain_text("login connection 'docs': finished")
        page.screenshot(path=str(SHOTS / "9-operator.png"), full_page=True)
    assert stored_tokens(gateway.state_root) == []
    with gateway.client() as http:
        docs = next(c for c in http.get("/v1/connections").json()["connections"] if c["name"] == "docs")
    # Forgotten in memory too: the connection cannot list its tools with the tokens it held before.
    assert docs["state"] == "needs_login" and docs["oauth"]["loggedIn"] is False
    assert docs["tools"] is None, docs
