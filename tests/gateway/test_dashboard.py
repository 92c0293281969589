"""`deploy/grafana-dashboard.json` against a real `agent-sdk serve`: every metric its queries (panels and
template variables) name is one a `/v1/metrics` scrape of the gateway exposes, parsed with
`prometheus_client.parser` (a renamed metric would leave a panel empty without a word)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import Served, Upstream, make_project, serve, url_connection

pytestmark = [pytest.mark.peers]

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
_NAME = re.compile(r"\b((?:agent_sdk|process|python)_[a-zA-Z0-9_]+)\b")
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("dashboard")
    project = make_project(root / "project", {"everything": url_connection(everything.url)})
    running = serve(project, root / "state")
    yield running
    running.stop()


def exported(served: Served) -> set[str]:
    """Every series name a PromQL query can select on this gateway: each family's samples as the text
    format writes them (a counter's `_total`, a histogram's `_bucket`/`_sum`/`_count`), labelled families
    that have no child yet included."""
    with served.client() as http:
        called = http.post("/v1/tools/echo", json={"input": {"message": "dashboard"}})
        assert called.status_code == 200, called.text
        scraped = http.get("/v1/metrics")
    assert scraped.status_code == 200, scraped.text
    names: set[str] = set()
    for family in text_string_to_metric_families(scraped.text):
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for each panel target and each query variable."""
    found = [
        (f"panel {panel['title']!r} {target['refId']}", target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable["type"] == "query":
            query = variable["query"]
            found.append((f"variable {variable['name']!r}", query["query"] if isinstance(query, dict) else query))
    return found


def test_every_dashboard_query_names_a_metric_the_gateway_exports(served: Served) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    names = exported(served)
    found = queries(dashboard)
    assert len(found) >= 15, "the dashboard lost its panels"
    unknown: list[str] = []
    for where, expr in found:
        used = _NAME.findall(expr)
        assert used, f"{where} names no metric: {expr}"
        unknown += [f"{where}: {name}" for name in used if name not in names]
    assert not unknown, "metrics the gateway does not export:\n" + "\n".join(unknown)
    # What an operator needs first is on it: calls, errors, latency, connections, refusals, versions.
    every = " ".join(expr for _, expr in found)
    for needed in (
        "agent_sdk_tool_calls_total",
        "agent_sdk_tool_call_duration_seconds_bucket",
        "agent_sdk_http_request_duration_seconds_bucket",
        "agent_sdk_connection_state",
        "agent_sdk_auth_refusals_total",
        "agent_sdk_build_info",
    ):
        assert needed in every, needed


def test_the_dashboard_is_a_grafana_dashboard_with_a_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    [source] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
