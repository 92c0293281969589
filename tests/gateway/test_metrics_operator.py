"""What an operator's Prometheus expects of `GET /v1/metrics` on a real `agent-sdk serve` (parsed with
`prometheus_client.parser`): process and build info, HTTP durations by route template and status,
each connection's state, buckets under a millisecond, no `_created` series, a scrape credential
that reads metrics and nothing else, the JSON access log's fields, and, against oidc-provider, the
stored access token's expiry and a failed refresh counted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port
from tests.oauth.flows.test_cli import agent_sdk
from tests.oauth.peers import ResourceServer

from .conftest import Served, Upstream, assert_clean, make_project, serve, url_connection

pytestmark = [pytest.mark.peers]

BEARER = "peer-bearer-token-0123456789"
OPERATOR = "operator-token-0123456789abc"
SCRAPE = "scrape-only-token-0123456789abcd"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(served: Served, token: str = SCRAPE) -> tuple[Samples, str]:
    with served.client({"Authorization": f"Bearer {token}"}) as http:
        answer = http.get("/v1/metrics")
    assert answer.status_code == 200, answer.text
    out: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, answer.text


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("metrics-operator")
    project = make_project(root / "project", {"everything": url_connection(everything.url)})
    flags = (
        "--bearer-token",
        BEARER,
        "--operator-token",
        OPERATOR,
        "--metrics-token",
        SCRAPE,
        "--access-log",
        "--log-format",
        "json",
    )
    running = serve(project, root / "state", *flags)
    running.headers = {"Authorization": f"Bearer {BEARER}"}
    yield running
    running.stop()
    assert_clean(running.log_text(), [BEARER, OPERATOR, SCRAPE])


def test_a_scrape_has_process_build_http_and_connection_metrics_and_no_created_series(served: Served) -> None:
    with served.client() as http:
        called = http.post("/v1/tools/echo", json={"input": {"message": "metrics"}})
        assert called.status_code == 200, called.text
        missing = http.get("/v1/session/sess_not_a_real_one_7f3a/events")
        assert missing.status_code == 404
    found, text = scrape(served)
    assert (value(found, "process_resident_memory_bytes") or 0) > 0
    assert value(found, "process_cpu_seconds_total") is not None
    assert any(name == "python_info" for name, _ in found)
    [build] = [labels for name, labels in found if name == "agent_sdk_build_info"]
    assert dict(build)["version"] == "0.1.0" and dict(build)["mcp"] and dict(build)["python"]
    # By route template and status, never the raw path.
    assert (
        value(
            found,
            "agent_sdk_http_request_duration_seconds_count",
            route="/v1/tools/{name}",
            method="POST",
            status="200",
        )
        == 1
    )
    events = "/v1/session/{session_id}/events"
    assert value(found, "agent_sdk_http_request_duration_seconds_count", route=events, method="GET", status="404") == 1
    assert "sess_not_a_real_one" not in text
    # The upstream is open: its state is 1, every other state 0.
    states = {dict(labels)["state"]: v for (name, labels), v in found.items() if name == "agent_sdk_connection_state"}
    assert states == {"idle": 0, "queued": 0, "opening": 0, "open": 1, "failing": 0, "paused": 0, "needs_login": 0}
    # Latency buckets start at 100 µs.
    les = sorted(
        float(dict(labels)["le"]) for (name, labels) in found if name == "agent_sdk_tool_call_duration_seconds_bucket"
    )
    assert les[0] == 0.0001
    assert not [name for name, _ in found if name.endswith("_created")]
    # `name[]` narrows a scrape to the samples named (the console asks for what it draws only).
    with served.client({"Authorization": f"Bearer {SCRAPE}"}) as http:
        narrow = http.get("/v1/metrics", params={"name[]": ["agent_sdk_build_info", "agent_sdk_tool_calls_total"]})
    names = {s.name for family in text_string_to_metric_families(narrow.text) for s in family.samples}
    assert names == {"agent_sdk_build_info", "agent_sdk_tool_calls_total"}, names
    # The JSON access log: the call's line carries method, route template, status and latency as fields.
    lines = [json.loads(line) for line in served.log_text().splitlines() if line.startswith("{")]
    access = [doc for doc in lines if doc.get("event") == "http_request" and doc.get("method") == "POST"]
    assert access, lines
    assert access[0]["path"] == "/v1/tools/{name}" and access[0]["status"] == 200
    assert isinstance(access[0]["latency_ms"], float) and access[0]["latency_ms"] > 0
    assert '"POST /v1/tools/echo HTTP/1.1" 200' in access[0]["message"]


def test_the_metrics_token_reads_metrics_and_nothing_else(served: Served) -> None:
    scraper = {"Authorization": f"Bearer {SCRAPE}"}
    with httpx2.Client(base_url=served.url, timeout=30, headers=scraper) as http:
        assert http.get("/v1/metrics").status_code == 200
        assert http.get("/v1/tools").status_code == 401
        assert http.get("/v1/sessions").status_code == 401
        assert http.get("/v1/connections").status_code == 401
        assert http.post("/v1/tools/echo", json={"input": {"message": "no"}}).status_code == 401
        assert http.post("/v1/connections/everything/restart", json={}).status_code == 401
    with httpx2.Client(base_url=served.url, timeout=30) as http:
        assert http.get("/v1/metrics").status_code == 401  # no token: the chain's answer
        assert http.get("/v1/metrics", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    scrape(served, OPERATOR)  # an operator token reads it too
    with served.client() as http:  # a peer's bearer token does not (docs/http-api.md, "Roles")
        assert http.get("/v1/metrics").status_code == 403


def test_the_stored_token_expiry_and_a_failed_refresh_are_metrics(tmp_path: Path, resource: ResourceServer) -> None:
    body = f"connection = define_connection(url={resource.url!r}, oauth=True, advertise_tools=True)\n"
    project = make_project(
        tmp_path / "project", {"docs": "from connections import define_connection\n\n" + body}, tools=False
    )
    login = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert login.returncode == 0, login.stderr
    state = project / ".agent-sdk"
    served = serve(project, state, "--metrics-token", SCRAPE)
    try:
        found, text = scrape(served)
        expires_in = value(found, "agent_sdk_oauth_token_expires_in_seconds", connection="docs")
        assert expires_in is not None and 0 < expires_in <= 3600
        # The stored token expires, and its token endpoint is now a port where nothing listens.
        store = state / "mcp-auth.json"
        doc = json.loads(store.read_text())
        [record] = doc["grants"]["docs"].values()
        record["tokens"]["expires_at"] = time.time() - 1000
        record["token_endpoint"] = f"http://127.0.0.1:{free_port()}/token"
        store.write_text(json.dumps(doc))
        with served.client() as http:
            failed = http.post("/v1/tools/echo", json={"input": {"text": "refresh first"}})
        assert failed.status_code != 200
        found, text = scrape(served)
        assert value(found, "agent_sdk_oauth_refresh_failures_total", connection="docs") == 1
        assert value(found, "agent_sdk_oauth_refreshes_total", connection="docs") == 0
        expired = value(found, "agent_sdk_oauth_token_expires_in_seconds", connection="docs")
        assert expired is not None and -1100 < expired < -1000
        for token in (t for r in doc["grants"]["docs"].values() for t in r["tokens"].values() if isinstance(t, str)):
            if len(token) > 16:
                assert token not in text
    finally:
        served.stop()
