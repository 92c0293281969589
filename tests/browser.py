"""Debian's chromium, driven by Playwright for Python (never `playwright install`: it cannot download here).

`chromium()` starts a fresh headless browser with its own profile folder; a missing browser is a
failure with the fix, never a skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("AGENT_SDK_ARTIFACTS", ROOT / ".artifacts"))
"""Where browser tests write screenshots (`AGENT_SDK_ARTIFACTS`, default `.artifacts/`, ignored by git)."""


@contextmanager
def chromium(profile: Path, **context: object) -> Iterator[BrowserContext]:
    """A headless chromium with a fresh `--user-data-dir` (`profile`); `context` goes to the browser context."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; run `bash scripts/test` once (it installs Debian's chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1100, "height": 900},
            **context,  # type: ignore[arg-type]
        )
        try:
            yield browser
        finally:
            browser.close()


def through_idp(page: Page, idp: str, person: str) -> None:
    """Pass oidc-provider's login and consent pages (tests/oauth/oidc_provider.mjs) as `person`, as often as the
    flow comes back to them."""
    for _ in range(8):
        page.wait_for_load_state()
        if not page.url.startswith(idp):
            return
        if page.locator("input[name=login]").count():
            page.fill("input[name=login]", person)
            page.fill("input[name=password]", "any password")
        with page.expect_navigation():
            page.click("button[type=submit]")
    raise AssertionError(f"still at the IdP after 8 pages: {page.url}")


@contextmanager
def signed_in(profile: Path, url: str, idp: str, person: str) -> Iterator[Page]:
    """A fresh chromium that opened `url` and passed the IdP's pages as `person`; its page."""
    with chromium(profile) as browser:
        page = browser.new_page()
        page.goto(url)
        through_idp(page, idp, person)
        yield page
