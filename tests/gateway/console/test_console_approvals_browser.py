"""The console's approval and audit panels in a real browser (Debian's chromium through Playwright)
against a real `agent-sdk serve` with server-everything behind: a call held for approval shows up, the
operator approves it with the page's button, the call completes, and the audit panel names the approver. The
row shows what the operator judges: the arguments (a credential in them masked), the person and the peer.
Screenshots go to `.artifacts/console/` (docs/audit.md)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import expect

from tests.browser import ARTIFACTS, chromium

from ..conftest import Served, Upstream, make_project, serve

pytestmark = [pytest.mark.peers, pytest.mark.timeout(180)]

SHOTS = ARTIFACTS / "console"
SECRET = "sk-browser-0123456789abcdef"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-approvals")
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, require_approval=['echo'])\n"
    )
    served = serve(make_project(root / "project", {"everything": body}), root / "state")
    try:
        yield served
    finally:
        served.stop()


def test_an_operator_approves_a_held_call_in_the_console_and_the_audit_panel_names_them(
    gateway: Served, tmp_path: Path
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    answers: list[httpx2.Response] = []

    def call() -> None:
        with httpx2.Client(base_url=gateway.url, timeout=120) as http:
            message = f"approved in the browser, Authorization: Bearer {SECRET}"
            headers = {"User-Agent": "console-test-peer/1.0"}
            answers.append(http.post("/v1/tools/echo", json={"input": {"message": message}}, headers=headers))

    held = threading.Thread(target=call, daemon=True)
    held.start()
    with chromium(tmp_path / "profile") as browser:
        page = browser.new_page()
        page.goto(f"{gateway.url}/?refresh=1")
        row = page.locator("#approvals tr[data-tool='echo']")
        expect(row).to_be_visible(timeout=60_000)
        expect(row).to_contain_text("everything")
        expect(row.locator("td.arguments")).to_contain_text("approved in the browser, Authorization: Bearer ***")
        expect(row.locator("td.person")).to_have_text("loopback")  # the local user; an OAuth person by name
        expect(row.locator("td.peer")).to_contain_text("console-test-peer/1.0")
        assert SECRET not in page.content()
        page.screenshot(path=str(SHOTS / "approval-waiting.png"), full_page=True)
        row.get_by_role("button", name="Approve").click()
        held.join(timeout=60)
        assert answers and answers[0].status_code == 200, answers
        assert "approved in the browser" in answers[0].text
        expect(page.locator("#approvals")).to_contain_text("No call is waiting.", timeout=30_000)
        record = page.locator("#audit tr[data-outcome='ok']").first
        expect(record).to_contain_text("echo", timeout=30_000)
        expect(record).to_contain_text("loopback")  # the approver (the local operator), beside the caller
        page.screenshot(path=str(SHOTS / "audit-trail.png"), full_page=True)
