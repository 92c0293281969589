"""`agent-sdk mcp oauth` as a user runs it: a real process, real oidc-provider, output read as text."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.peers import ROOT

from .peers import AuthServer, ResourceServer

pytestmark = pytest.mark.peers

CLI = Path(sys.executable).parent / "agent-sdk"


def make_project(root: Path, url: str) -> Path:
    connections = root / "agent" / "mcp-connections"
    connections.mkdir(parents=True)
    (connections / "docs.py").write_text(
        f"from connections import define_connection\n\nconnection = define_connection(url={url!r}, oauth=True)\n"
    )
    (connections / "plain.py").write_text(
        f"from connections import define_connection\n\nconnection = define_connection(url={url!r})\n"
    )
    return root


def agent_sdk(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args],
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def stored_tokens(state_root: Path) -> list[str]:
    data = json.loads((state_root / "mcp-auth.json").read_text())
    found: list[str] = []
    for per_connection in data["grants"].values():
        for record in per_connection.values():
            tokens = record["tokens"] or {}
            found += [t for t in (tokens.get("access_token"), tokens.get("refresh_token")) if t]
    return found


def test_login_store_status_logout(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    keyring_env = {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring", "XDG_DATA_HOME": str(tmp_path)}

    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=keyring_env)
    assert done.returncode == 0, done.stderr
    assert "logged in to" in done.stdout and "mcp-auth.json" in done.stdout
    assert "OS keyring" in done.stdout
    state_root = project / ".agent-sdk"
    tokens = stored_tokens(state_root)
    assert len(tokens) == 2
    assert (tmp_path / "python_keyring" / "keyring_pass.cfg").exists()

    status = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status")
    assert status.returncode == 0, status.stderr
    assert "refresh token: yes" in status.stdout and "logged in" in status.stdout

    revocations = auth_server.stats()["revocations"]
    out = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--logout")
    assert out.returncode == 0, out.stderr
    # The refresh token (and with it the grant) is revoked; oidc-provider cannot revoke a JWT access token.
    assert "revoked 1 token(s)" in out.stdout or "revoked 2 token(s)" in out.stdout
    assert auth_server.stats()["revocations"] > revocations
    gone = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status")
    assert gone.returncode == 1 and "not logged in" in gone.stdout

    for run in (done, status, out):
        for token in tokens:
            assert token not in run.stdout and token not in run.stderr


def test_a_connection_without_oauth_is_refused_with_the_fix(tmp_path: Path, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    done = agent_sdk("mcp", "oauth", "plain", "--dir", str(project), "--non-interactive")
    assert done.returncode == 1
    assert "must be define_connection(url=..., oauth=True)" in done.stderr
    assert "Traceback" not in done.stderr


def test_store_without_a_keyring_backend_names_the_fix(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    project = make_project(tmp_path / "project", resource.url)
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=env)
    assert done.returncode == 1
    assert "no OS keyring backend" in done.stderr and "AGENT_SDK_SECRETS_URL" in done.stderr
    assert "Traceback" not in done.stderr
    for token in stored_tokens(project / ".agent-sdk"):
        assert token not in done.stderr and token not in done.stdout


def test_a_corrupt_mcp_auth_json_is_one_sentence(tmp_path: Path, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    (project / ".agent-sdk").mkdir()
    (project / ".agent-sdk" / "mcp-auth.json").write_text("{not json")
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status")
    assert done.returncode == 1
    assert "mcp-auth.json is not valid JSON" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_no_browser_waits_then_times_out_with_a_sentence(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    project = make_project(tmp_path / "project", resource.url)
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--no-browser", "--timeout", "1")
    assert done.returncode == 1
    assert "Open this URL in a browser" in done.stderr and "code_challenge_method=S256" in done.stderr
    assert "Waiting for the redirect" in done.stderr
    assert "no login redirect reached" in done.stderr and "Traceback" not in done.stderr


def test_no_browser_accepts_the_pasted_redirect_url(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    # The user pastes the URL the browser ended on: here a forged one, which must be refused as such.
    project = make_project(tmp_path / "project", resource.url)
    pasted = "http://127.0.0.1:9/callback?code=abc&state=not-ours\n"
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--no-browser", "--timeout", "30", stdin=pasted)
    assert done.returncode == 1
    assert "different state" in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_while_waiting_exits_cleanly(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    proc = subprocess.Popen(
        [str(CLI), "mcp", "oauth", "docs", "--dir", str(project), "--no-browser"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,  # kept open: the CLI is waiting for a paste as well as for the redirect
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    waited = ""
    for line in proc.stderr:  # wait (on the CLI's own output, not a clock) until it is waiting
        waited += line
        if "Waiting for the redirect" in line:
            break
    port = int(waited.split("Waiting for the redirect to http://127.0.0.1:")[1].split("/")[0])
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in rest and "Traceback" not in rest
    with socket.socket() as probe:  # the loopback listener is gone with it
        assert probe.connect_ex(("127.0.0.1", port)) != 0
