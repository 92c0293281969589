"""An operator's day in the console, in Debian's chromium (Playwright) against a real `agent-sdk serve` behind
bearer tokens with server-everything behind it: the page's own 401s from before the operator token is typed are
not failures (neither in *Last failures* nor in *Recent log*) while a real refusal still is; an approval made
with the page's button shows under *Operator actions*; the audit panel filters by person, tool and outcome."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import Page, expect

from tests.browser import chromium

from ..conftest import Served, Upstream, make_project, serve

pytestmark = [pytest.mark.peers, pytest.mark.timeout(240)]

PEER = "console-day-peer-token-0123456789"
OPERATOR = "console-day-operator-token-0123456789"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-day")
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, require_approval=['echo'])\n"
    )
    flags = ("--bearer-token", PEER, "--operator-token", OPERATOR)
    served = serve(make_project(root / "project", {"everything": body}), root / "state", *flags)
    try:
        yield served
    finally:
        served.stop()


def _held_echo(gateway: Served, answers: list[httpx2.Response]) -> threading.Thread:
    def call() -> None:
        with httpx2.Client(base_url=gateway.url, timeout=120, headers={"Authorization": f"Bearer {PEER}"}) as http:
            answers.append(http.post("/v1/tools/echo", json={"input": {"message": "held for the operator"}}))

    held = threading.Thread(target=call, daemon=True)
    held.start()
    return held


def _audit_rows(page: Page) -> list[str]:
    return page.locator("#audit tr[data-outcome]").all_inner_texts()


def test_pre_token_refusals_are_not_failures_approvals_are_actions_and_the_audit_filters(
    gateway: Served, tmp_path: Path
) -> None:
    answers: list[httpx2.Response] = []
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.goto(f"{gateway.url}/?refresh=1")
        expect(page.locator("#token-form")).to_be_visible(timeout=30_000)  # the page was refused: no token yet
        page.fill("#token", OPERATOR)
        page.click("#token-form button[type='submit']")
        expect(page.locator("#operator-views")).to_be_visible(timeout=30_000)
        # A real refusal (a wrong token, from elsewhere) is a failure, as before.
        with httpx2.Client(base_url=gateway.url, timeout=30) as http:
            assert http.get("/v1/tools", headers={"Authorization": "Bearer not-the-token"}).status_code == 401
            called = http.post(
                "/v1/tools/get-sum", json={"input": {"a": 2, "b": 3}}, headers={"Authorization": f"Bearer {PEER}"}
            )
            assert called.status_code == 200, called.text
        expect(page.locator("#failures")).to_contain_text("refused GET /v1/tools", timeout=30_000)
        expect(page.locator("#log")).to_contain_text("refused GET /v1/tools", timeout=30_000)
        # ...and the page's own 401s from before the token are in neither list (the server's log keeps them).
        for panel in ("#failures", "#log"):
            shown = page.locator(panel).inner_text()
            assert shown.count("refused") == 1, f"{panel}:\n{shown}"
        assert "refused GET /v1/info" in gateway.log_text()

        # An approval made with the page's button is an operator action.
        held = _held_echo(gateway, answers)
        row = page.locator("#approvals tr[data-tool='echo']")
        expect(row).to_be_visible(timeout=60_000)
        row.get_by_role("button", name="Approve").click()
        held.join(timeout=60)
        assert answers and answers[0].status_code == 200, answers
        expect(page.locator("#actions")).to_contain_text("approved a call of tool 'echo'", timeout=30_000)

        # The audit panel filters by tool, outcome and person.
        expect(page.locator("#audit tr[data-outcome='ok']")).to_have_count(2, timeout=30_000)
        peer = page.locator("#audit tr[data-outcome='ok'] td").nth(1).inner_text()  # time, principal, ...
        assert peer.startswith("bearer:")
        page.fill("#audit-tool", "echo")
        page.click("#audit-filter button[type='submit']")
        expect(page.locator("#audit tr[data-outcome]")).to_have_count(1, timeout=30_000)
        [only] = _audit_rows(page)
        assert "echo" in only and "get-sum" not in only
        page.fill("#audit-tool", "")
        page.select_option("#audit-outcome", "refused")
        page.click("#audit-filter button[type='submit']")
        expect(page.locator("#audit")).to_contain_text("No calls recorded yet.", timeout=30_000)
        page.select_option("#audit-outcome", "ok")
        page.fill("#audit-person", "bearer:000000000000")
        page.click("#audit-filter button[type='submit']")
        expect(page.locator("#audit")).to_contain_text("No calls recorded yet.", timeout=30_000)
        page.fill("#audit-person", peer)
        page.click("#audit-filter button[type='submit']")
        expect(page.locator("#audit tr[data-outcome='ok']")).to_have_count(2, timeout=30_000)
