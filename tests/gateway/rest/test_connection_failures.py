"""A connection that cannot be listed, seen from a direct call: the answer names it and its real cause,
with a status that fits, and a metric counts it; its failure stays its own.

Real peers: oidc-provider (the authorization server, stopped to make it unreachable), the
audience-checking MCP resource server behind it (`whoami`), and the reference "everything" server
(a healthy advertised `echo`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.accounts.test_hub_hardening import rpc
from tests.gateway.conftest import ROOT, Served, Upstream, assert_clean, make_project, serve, url_connection
from tests.oauth.peers import ResourceServer, oidc_provider, resource_server

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"


def _oauth_connection(url: str) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={url!r}, oauth=True, advertise_tools=True)\n"
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return subprocess.run(
        [str(AGENT_SDK), *args],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _listing_failures(served: Served) -> dict[tuple[str, str], float]:
    with served.client() as http:
        text = http.get("/v1/metrics").text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "agent_sdk_connection_listing_failures_total":
                found[(sample.labels["connection"], sample.labels["code"])] = sample.value
    return found


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ResourceServer]:
    """A resource server behind oidc-provider that nobody has logged in to."""
    with oidc_provider(3600) as issuer, resource_server(issuer.issuer) as server:
        yield server


def test_a_connection_waiting_for_a_login_is_named_and_spills_onto_no_other(
    tmp_path: Path, locked: ResourceServer, everything: Upstream
) -> None:
    project = make_project(
        tmp_path / "project",
        {"docs": _oauth_connection(locked.url), "everything": url_connection(everything.url)},
    )
    served = serve(project, tmp_path / "state")
    try:
        with served.client() as http:
            refused = http.post("/v1/tools/whoami", json={})
            # Today: 404 unknown_tool ("no callable tool named 'whoami'"). The tool may well be on 'docs'.
            assert refused.status_code == 401, refused.text
            body = refused.json()
            assert body["error"] == "connection_unauthorized" and body["connection"] == "docs", body
            assert "'docs'" in body["message"] and "agent-sdk mcp oauth docs" in body["message"], body
            for _ in range(6):  # more calls than the crash-loop count (5)
                assert http.post("/v1/tools/whoami", json={}).status_code == 401
                ok = http.post("/v1/tools/echo", json={"input": {"message": "still here"}})
                assert ok.status_code == 200 and ok.json()["isError"] is False, ok.text
                assert http.post("/v1/tools/lookup", json={"input": {"key": "ab"}}).json()["ok"] is True
            states = {c["name"]: c for c in http.get("/v1/connections").json()["connections"]}
        # A peer on /v1/mcp/tools hears the same cause, as a JSON-RPC error naming the connection.
        peer = rpc(served.url, "/v1/mcp/tools", "tools/call", {"name": "whoami", "arguments": {}})
    finally:
        served.stop()
    log = served.log_text()
    assert_clean(log)
    # Waiting for a login is not a crash: no count, no pause, no reopen warning per call; said once.
    assert states["docs"]["state"] == "needs_login" and states["docs"]["failures"] == 0, states["docs"]
    assert "restarts paused" not in log and "reopening its upstream session" not in log, log
    assert log.count("waiting for a login") == 1, log
    error = peer.json()["error"]
    assert error["data"]["error"] == "connection_unauthorized" and error["data"]["connection"] == "docs", error
    assert "'docs'" in error["message"], error


def test_an_unreachable_authorization_server_is_not_a_refused_login_and_is_counted(
    tmp_path: Path, everything: Upstream
) -> None:
    authorization = ExitStack()
    issuer = authorization.enter_context(oidc_provider(3600))
    with authorization, resource_server(issuer.issuer) as server:
        project = make_project(
            tmp_path / "project", {"docs": _oauth_connection(server.url), "everything": url_connection(everything.url)}
        )
        login = _cli("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
        assert login.returncode == 0, login.stderr
        authorization.close()  # the authorization server goes down
        # ... and the access token is due for a refresh.
        state_root = project / ".agent-sdk"
        auth_file = state_root / "mcp-auth.json"
        saved = json.loads(auth_file.read_text())
        for per_connection in saved["grants"].values():
            for record in per_connection.values():
                record["tokens"]["expires_at"] = 1.0
        auth_file.write_text(json.dumps(saved))
        served = serve(project, state_root)
        try:
            with served.client() as http:
                refused = http.post("/v1/tools/whoami", json={})
                healthy = http.post("/v1/tools/echo", json={"input": {"message": "fine"}})
            counted = _listing_failures(served)
        finally:
            served.stop()
    # Today: 404 unknown_tool, and connectionErrors say connection_unauthorized.
    assert refused.status_code == 503, refused.text
    body = refused.json()
    assert body["error"] == "authorization_server_unreachable" and body["connection"] == "docs", body
    assert "unreachable" in body["message"] and "'docs'" in body["message"], body
    assert [e["code"] for e in body["connectionErrors"]] == ["authorization_server_unreachable"], body
    assert healthy.status_code == 200 and healthy.json()["isError"] is False, healthy.text
    assert counted.get(("docs", "authorization_server_unreachable"), 0) >= 1, counted
    assert_clean(served.log_text(), saved_tokens(saved))


def saved_tokens(saved: dict[str, object]) -> list[str]:
    grants: dict[str, dict[str, dict[str, dict[str, str]]]] = saved["grants"]  # type: ignore[assignment]
    return [
        token
        for per_connection in grants.values()
        for record in per_connection.values()
        for token in (record["tokens"]["access_token"], record["tokens"]["refresh_token"])
    ]


def test_the_cli_calls_a_healthy_tool_as_the_http_api_does_and_names_the_failing_connection(
    tmp_path: Path, locked: ResourceServer, everything: Upstream
) -> None:
    project = make_project(
        tmp_path / "project",
        {"docs": _oauth_connection(locked.url), "everything": url_connection(everything.url)},
    )
    # Today: "the tools cannot be listed (fail-closed)", although POST /v1/tools/echo succeeds.
    done = _cli("tools", "call", "echo", "--dir", str(project), "--input", '{"message": "from the cli"}')
    assert done.returncode == 0, done.stderr
    assert "from the cli" in json.loads(done.stdout)["content"][0]["text"]
    refused = _cli("tools", "call", "whoami", "--dir", str(project))
    assert refused.returncode == 1
    assert "'docs'" in refused.stderr and "agent-sdk mcp oauth docs" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
