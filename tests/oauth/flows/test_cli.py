"""`agent-sdk mcp oauth` as a user runs it: a real process, real oidc-provider, output read as text."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import httpx2
import pytest

from oauth.flows._interaction import _follow  # pyright: ignore[reportPrivateUsage]
from tests.peers import ROOT

from ..peers import AuthServer, ResourceServer, bad_server

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def bad_as() -> Iterator[str]:
    with bad_server() as base:
        yield base


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
    """Every token in `mcp-auth.json` (a `--store` pointer holds none)."""
    path = state_root / "mcp-auth.json"
    if not path.exists():
        return []
    found: list[str] = []
    for per_connection in json.loads(path.read_text())["grants"].values():
        for record in per_connection.values():
            tokens = record.get("tokens") or {}
            found += [t for t in (tokens.get("access_token"), tokens.get("refresh_token")) if t]
    return found


def test_login_store_status_logout(tmp_path: Path, auth_server: AuthServer, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    keyring_env = {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring", "XDG_DATA_HOME": str(tmp_path)}

    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=keyring_env)
    assert done.returncode == 0, done.stderr
    assert "OS keyring" in done.stdout and "mcp-auth.json points there" in done.stdout
    state_root = project / ".agent-sdk"
    # One grant, one home: the tokens are in the keyring only; mcp-auth.json holds a pointer.
    assert stored_tokens(state_root) == []
    assert (tmp_path / "python_keyring" / "keyring_pass.cfg").exists()

    status = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status", env=keyring_env)
    assert status.returncode == 0, status.stderr
    assert "refresh token: yes" in status.stdout and "logged in" in status.stdout
    assert "stored in: OS keyring" in status.stdout

    revocations = auth_server.stats()["revocations"]
    out = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--logout", env=keyring_env)
    assert out.returncode == 0, out.stderr
    assert "revoked at the authorization server" in out.stdout
    assert auth_server.stats()["revocations"] > revocations
    gone = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--status", env=keyring_env)
    assert gone.returncode == 1 and "not logged in" in gone.stdout
    assert "mcp-oauth:docs" not in (tmp_path / "python_keyring" / "keyring_pass.cfg").read_text()
    assert json.loads((state_root / "mcp-auth.json").read_text())["grants"] == {}  # the pointer went too

    for run in (done, status, out):
        assert "Traceback" not in run.stderr
        assert "access_token" not in run.stdout + run.stderr


def test_a_connection_without_oauth_is_refused_with_the_fix(tmp_path: Path, resource: ResourceServer) -> None:
    project = make_project(tmp_path / "project", resource.url)
    done = agent_sdk("mcp", "oauth", "plain", "--dir", str(project), "--non-interactive")
    assert done.returncode == 1
    assert "must be define_connection(url=..., oauth=True)" in done.stderr
    assert "Traceback" not in done.stderr


def test_store_without_a_keyring_backend_is_found_before_the_login(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    project = make_project(tmp_path / "project", resource.url)
    codes = auth_server.stats()["codes"]
    env = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=env)
    assert done.returncode == 1
    assert "no OS keyring backend" in done.stderr and "AGENT_SDK_SECRETS_URL" in done.stderr
    assert "Traceback" not in done.stderr
    assert auth_server.stats()["codes"] == codes  # refused before anyone logged in
    assert stored_tokens(project / ".agent-sdk") == []


@pytest.mark.parametrize(
    ("secrets_url", "said"),
    [
        ("http://not-redis.example/0", "must be a redis://"),
        ("redis://127.0.0.1:9/0", "the Redis token store at redis://127.0.0.1:9/0 failed"),  # nothing listens on 9
    ],
)
def test_a_bad_deployment_store_is_found_before_the_login(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, secrets_url: str, said: str
) -> None:
    project = make_project(tmp_path / "project", resource.url)
    codes = auth_server.stats()["codes"]
    env = {"AGENT_SDK_SECRETS_URL": secrets_url}
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store", env=env)
    assert done.returncode == 1
    assert said in done.stderr and "Traceback" not in done.stderr
    assert "Open this URL" not in done.stderr
    assert auth_server.stats()["codes"] == codes


@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_refused(tmp_path: Path, value: str) -> None:
    project = make_project(tmp_path / "project", "http://127.0.0.1:9/mcp")
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--no-browser", "--timeout", value)
    assert done.returncode == 2
    assert "--timeout: must be a number of seconds above 0" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


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


def _waiting_cli(project: Path, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """`mcp oauth docs --no-browser` with stdin an open pipe (nobody types); returns it once it waits,
    with the authorization URL and the redirect URI it printed."""
    proc = subprocess.Popen(
        [str(CLI), "mcp", "oauth", "docs", "--dir", str(project), "--no-browser", *extra],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    printed = ""
    for line in proc.stderr:
        printed += line
        if "Waiting for the redirect" in line:
            break
    url = next(part.strip() for part in printed.splitlines() if part.strip().startswith("http"))
    redirect = printed.split("Waiting for the redirect to ")[1].split(" ")[0]
    return proc, url, redirect


def _exits(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    # Generous bound: the point is that it exits at all while stdin stays open (it used to hang
    # until Enter or end of input), not how fast.
    # `communicate()` would close stdin (end of input ended the old hang too), so wait with it open;
    # the little the CLI prints fits the pipes.
    code = proc.wait(timeout=30)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdin.close()
    return code, out, err


def test_no_browser_with_an_open_stdin_exits_after_a_timeout(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    proc, _, _ = _waiting_cli(make_project(tmp_path / "project", resource.url), "--timeout", "2")
    code, _, err = _exits(proc)
    assert code == 1 and "no login redirect reached" in err and "Traceback" not in err


def test_no_browser_with_an_open_stdin_exits_after_an_error(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    proc, _, redirect = _waiting_cli(make_project(tmp_path / "project", resource.url))
    page = httpx2.get(f"{redirect}?code=forged&state=not-ours")
    assert "Login complete" not in page.text and "not the answer to the login" in page.text
    code, _, err = _exits(proc)
    assert code == 1 and "different state" in err and "Traceback" not in err


def test_no_browser_with_an_open_stdin_exits_after_success(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    proc, url, redirect = _waiting_cli(make_project(tmp_path / "project", resource.url))
    # The person in the browser: oidc-provider's login and consent forms, then the real redirect.
    anyio.run(_follow, url, SimpleNamespace(redirect_uri=redirect), "alice", "x", 20, 30.0)
    code, out, err = _exits(proc)
    assert code == 0, err
    assert "logged in to" in out and "Traceback" not in err


def test_a_callback_over_16_kb_is_refused_not_reported_as_a_forgery(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    proc, _, redirect = _waiting_cli(make_project(tmp_path / "project", resource.url))
    page = httpx2.get(f"{redirect}?code={'c' * 20000}&state=whatever")
    assert page.status_code == 414
    code, _, err = _exits(proc)
    assert code == 1 and "longer than 16384 bytes" in err
    assert "different state" not in err and "Traceback" not in err


@pytest.mark.parametrize("mode", ["evil-error", "evil-token", "evil-issuer"])
def test_escape_sequences_from_a_server_never_reach_the_terminal(tmp_path: Path, bad_as: str, mode: str) -> None:
    project = make_project(tmp_path / "project", f"{bad_as}/{mode}/mcp")
    done = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive")
    assert done.returncode == 1
    assert "owned" in done.stderr  # the server's text is shown, as data, and cut short
    assert len(done.stderr.splitlines()[-1]) < 700
    for unsafe in ("\x1b", "\x07", "\u202e"):
        assert unsafe not in done.stderr and unsafe not in done.stdout
    assert "Traceback" not in done.stderr


def test_the_next_login_listens_on_the_registered_redirect_uri(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer
) -> None:
    # A server that pins the registered redirect URI needs the same port every time, also right after
    # a login whose callback connection is still in TIME_WAIT on that port.
    project = make_project(tmp_path / "project", resource.url)
    assert agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--non-interactive").returncode == 0
    data = json.loads((project / ".agent-sdk" / "mcp-auth.json").read_text())
    registered = data["grants"]["docs"][resource.url]["client"]["redirect_uri"]
    waiting = agent_sdk("mcp", "oauth", "docs", "--dir", str(project), "--no-browser", "--timeout", "1")
    assert f"Waiting for the redirect to {registered} " in waiting.stderr
