"""The console's charts behind the documented nginx front (`deploy/nginx.conf`) with two replicas, in
Debian's chromium: each scrape may reach the other replica, whose counters are its own, and the
calls-per-second the page shows must stay non-negative and near the real call rate.

One replica gets a head start of calls no other has (sent to it directly), so a page that took a
difference between two replicas' counters would swing far above and below zero."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from playwright.sync_api import expect

from tests.browser import ARTIFACTS, chromium

from ..conftest import Served, make_project
from ..replicas import BEARER, OPERATOR, RedisServer, nginx_front, redis_server, replica

pytestmark = [pytest.mark.peers]

AUTH = {"Authorization": f"Bearer {BEARER}"}
PACE_S = 0.2
"""The load: one `lookup` call through nginx every 0.2 s (about 5 calls/s, less on a loaded box)."""


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


class Load:
    """Calls `lookup` through `front` at a steady pace until stopped; counts what succeeded and when."""

    def __init__(self, front: str) -> None:
        self.front = front
        self.stamps: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx2.Client(base_url=self.front, headers=AUTH, timeout=30) as http:
            while not self.done.is_set():
                answer = http.post("/v1/tools/lookup", json={"input": {"key": "rate"}})
                assert answer.status_code == 200, answer.text
                self.stamps.append(time.monotonic())
                self.done.wait(PACE_S)

    def rate(self, since: float, until: float) -> float:
        """Calls per second between `since` and `until` (the load runs steadily through both)."""
        return sum(since <= t <= until for t in self.stamps) / (until - since)


def test_the_console_rate_behind_nginx_with_two_replicas_is_the_real_rate(tmp_path: Path, redis: RedisServer) -> None:
    project = make_project(tmp_path / "project")
    replicas: list[Served] = [replica(project, tmp_path / f"r{i}", redis.url) for i in range(2)]
    try:
        # A head start on the first replica only: its counter is 60 ahead of the other's.
        with replicas[0].client(AUTH) as http:
            for _ in range(60):
                assert http.post("/v1/tools/lookup", json={"input": {"key": "head start"}}).status_code == 200
        with nginx_front(tmp_path / "nginx", [r.port for r in replicas]) as front:
            with httpx2.Client(base_url=front, headers=AUTH, timeout=30) as http:
                for _ in range(3):  # sessions in the Redis both replicas share, whichever started them
                    assert http.post("/v1/session", json={"message": "hello"}).status_code == 200
            load = Load(front)
            load.thread.start()
            try:
                with chromium(tmp_path / "profile") as browser:
                    page = browser.new_page()
                    page.goto(f"{front}/?refresh=1")
                    page.fill("#token", OPERATOR)  # the charts and who holds sessions are for operators
                    page.click("#token-form button[type='submit']")
                    charts = page.locator("#charts")
                    expect(charts).to_have_attribute("data-replicas", "2", timeout=30_000)
                    expect(charts.locator("h3")).to_have_text(["(authored)"], timeout=30_000)
                    shown: list[float] = []
                    began = time.monotonic()
                    last = charts.get_attribute("data-t")
                    for _ in range(10):  # ten scrapes, each of either replica
                        page.wait_for_function(
                            "prev => document.querySelector('#charts').dataset.t !== prev", arg=last, timeout=30_000
                        )
                        last = charts.get_attribute("data-t")
                        label = charts.locator(".chart .label").first.text_content() or ""
                        match = re.fullmatch(r"calls: (-?\d+\.\d+) /s", label)
                        assert match, label
                        shown.append(float(match.group(1)))
                    ended = time.monotonic()
                    (ARTIFACTS / "console").mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(ARTIFACTS / "console" / "7-two-replicas.png"), full_page=True)
                    table = page.locator("#tool-table tr[data-tool='lookup'] td.calls")
                    calls_shown = int(table.text_content() or "0")
                    # Who holds sessions: read from the shared Redis, the same answer from either replica.
                    expect(page.locator("#principals td.sessions")).to_have_text("3")
                    expect(page.locator("#principals")).to_contain_text("bearer:")
            finally:
                load.done.set()
                load.thread.join(timeout=30)
        real = load.rate(began, ended)
        print(f"shown {shown}, real {real:.2f} calls/s")
        # Never below zero, never a spike (a difference across replicas would be about +-60 calls/s here),
        # and on average the real rate (the first points can cover the page's first second, before the load).
        assert all(0 <= v <= 2.5 * real for v in shown), (shown, real)
        settled = shown[2:]
        assert 0.6 * real <= sum(settled) / len(settled) <= 1.4 * real, (shown, real)
        # The per-tool table sums both replicas: the head start and the load through nginx.
        assert 60 + len([t for t in load.stamps if t <= ended]) * 0.5 < calls_shown
    finally:
        for served in replicas:
            served.stop()
