"""`GET /v1/metrics` after a mixed run against a real upstream (the reference "everything" server)
and a real stdio child: every counter matches the calls made, and the text parses as Prometheus's."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.upstreams.proctable import matching

from .conftest import Served, Upstream, make_project, serve, url_connection

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
NOTES = ROOT / "examples" / "quickstart" / "servers" / "notes_server.py"
STDIO = (
    "from connections import define_connection\n\n"
    f"connection = define_connection(command={sys.executable!r}, args=[{str(NOTES)!r}], advertise_tools=True)\n"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("metrics")
    project = make_project(root / "project", {"everything": url_connection(everything.url), "notes": STDIO})
    running = serve(project, root / "state", "--log-format", "json")
    yield running
    running.stop()


def samples(served: Served) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with served.client() as http:
        scraped = http.get("/v1/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(scraped.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def kill_notes_child() -> None:
    [child] = matching(str(NOTES))
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while matching(str(NOTES)) and time.monotonic() < deadline:
        time.sleep(0.02)


def run_turns_and_a_refusal(served: Served) -> None:
    with served.client() as http:
        for message in ("hello", "fail on purpose"):
            started = http.post("/v1/session", json={"message": message})
            assert started.status_code == 200
            session = started.json()["sessionId"]
            deadline = time.monotonic() + 30
            while http.get(f"/v1/session/{session}").json()["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.05)
        refused = http.get("/v1/tools", headers={"X-Forwarded-For": "10.0.0.1"})
        assert refused.status_code == 401


async def test_metrics_count_what_a_mixed_run_did(served: Served) -> None:
    async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:
        for _ in range(3):
            assert not (await client.call_tool("echo", {"message": "hi"})).is_error
        assert (await client.call_tool("explode", {})).is_error
        assert not (await client.call_tool("lookup", {"key": "ab"})).is_error
        assert not (await client.call_tool("add_note", {"text": "one"})).is_error
    # The stdio child dies between calls: the next use restarts it (one upstream restart).
    kill_notes_child()
    async with Client(f"{served.url}/v1/mcp/tools", mode="legacy") as client:
        assert not (await client.call_tool("add_note", {"text": "two"})).is_error
    run_turns_and_a_refusal(served)

    found = samples(served)
    assert value(found, "agent_sdk_tool_calls_total", connection="everything", tool="echo", outcome="ok") == 3
    assert value(found, "agent_sdk_tool_call_duration_seconds_count", connection="everything", tool="echo") == 3
    assert value(found, "agent_sdk_tool_calls_total", connection="", tool="explode", outcome="failed") == 1
    assert value(found, "agent_sdk_tool_call_errors_total", connection="", tool="explode", code="tool_failed") == 1
    assert value(found, "agent_sdk_tool_calls_total", connection="", tool="lookup", outcome="ok") == 1
    assert value(found, "agent_sdk_tool_calls_total", connection="notes", tool="add_note", outcome="ok") == 2
    assert value(found, "agent_sdk_upstream_restarts_total", connection="notes") == 1
    assert value(found, "agent_sdk_upstream_restarts_total", connection="everything") == 0
    assert value(found, "agent_sdk_pool_sessions_open") == 2
    assert value(found, "agent_sdk_turns_total", outcome="completed") == 1
    assert value(found, "agent_sdk_turns_total", outcome="failed") == 1
    assert value(found, "agent_sdk_auth_refusals_total", status="401", code="unauthorized") == 1
    # Each connection was listed for real once (a restart drops its listing: notes twice); the
    # other listings of the run came from the listing cache.
    assert value(found, "agent_sdk_listing_cache_misses_total", connection="everything") == 1
    assert value(found, "agent_sdk_listing_cache_hits_total", connection="everything") >= 1
    # The log says the same, once: the restart with the connection's name.
    restarts = [line for line in served.log_text().splitlines() if '"event": "upstream_restart"' in line]
    assert len(restarts) == 1 and '"connection": "notes"' in restarts[0]


async def test_metrics_are_behind_the_auth_chain(served: Served) -> None:
    with served.client() as http:
        refused = http.get("/v1/metrics", headers={"Host": "example.com"})
    assert refused.status_code == 421


def test_info_names_the_metrics_endpoint(served: Served) -> None:
    with served.client() as http:
        info = http.get("/v1/info").json()
    assert info["runtime"]["endpoints"]["metrics"] == "/v1/metrics"
