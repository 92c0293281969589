"""`agent-sdk serve` uses the tokens `agent-sdk mcp oauth` stored: a real gateway process in front of
the audience-checking resource server, behind oidc-provider."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.conftest import free_port
from tests.oauth.flows.test_cli import agent_sdk, stored_tokens
from tests.processes import wait_for_port

from ..peers import AuthServer, ResourceServer

CLI = Path(sys.executable).parent / "agent-sdk"

# Long enough that the token cannot expire between the login and the calls on a loaded machine:
# the one refresh this test counts is the one the 401 causes.
ACCESS_TOKEN_TTL = 60


def test_served_oauth_connection_calls_and_refreshes_with_stored_tokens(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    project = tmp_path / "project"
    folder = project / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (folder / "docs.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={resource.url!r}, oauth=True, advertise_tools=True)\n"
    )
    login = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert login.returncode == 0, login.stderr
    tokens = stored_tokens(project / ".agent-sdk")
    grants_before = auth_server.stats()

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(CLI), "serve", "--dir", str(project), "--port", str(port)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_port(port, proc)
        base = f"http://127.0.0.1:{port}"
        with httpx2.Client(base_url=base, timeout=30) as http:
            first = http.post("/v1/tools/echo", json={"input": {"text": "through the gateway"}})
            assert first.status_code == 200, first.text
            assert first.json()["ok"] is True and "through the gateway" in str(first.json()["result"])

            # The resource server refuses the next request once: one refresh, one retry, same answer.
            resource.reject_next()
            second = http.post("/v1/tools/echo", json={"input": {"text": "after a 401"}})
            assert second.status_code == 200, second.text
            assert "after a 401" in str(second.json()["result"])

            info = http.get("/v1/info").text
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    grants_after = auth_server.stats()
    assert grants_after["codes"] == grants_before["codes"]  # no new login
    refreshes = grants_after["grants"].get("refresh_token", 0) - grants_before["grants"].get("refresh_token", 0)
    assert refreshes == 1
    assert grants_after["errors"].get("invalid_grant", 0) == grants_before["errors"].get("invalid_grant", 0)
    output = log.read_text()
    for token in [*tokens, *stored_tokens(project / ".agent-sdk")]:
        assert token not in info and token not in output
