"""`agent-sdk login --gateway URL`: an operator's CLI credential on an OAuth gateway, against oidc-provider (real)
as the company IdP, signing in through its login and consent forms; `agent-sdk approvals list` then acts with
it. Without any credential, the CLI's refusal names `AGENT_SDK_OPERATOR_TOKEN` and the login command."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from tests.oauth.helpers import authorize
from tests.oauth.peers import AuthServer, oidc_provider

from ..conftest import ROOT, Served, assert_clean, make_project, serve

pytestmark = [pytest.mark.peers, pytest.mark.timeout(180)]

CLI = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()"]


@pytest.fixture(scope="module")
def company_idp() -> Iterator[AuthServer]:
    with oidc_provider(3600, groups={"carol": ["gateway-admins"]}) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, company_idp: AuthServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("operator-login")
    flags = ("--oauth-issuer", company_idp.issuer, "--operator-claim", "groups=gateway-admins")
    served = serve(make_project(root / "project"), root / "state", *flags)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def _env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    return {**env, "PYTHONPATH": str(ROOT), "AGENT_SDK_CONFIG_DIR": str(config)}


def _login(gateway: Served, config: Path, person: str) -> subprocess.CompletedProcess[str]:
    """`agent-sdk login --gateway URL --no-browser`, the printed URL followed through the IdP's forms as `person`
    and its redirect delivered to the CLI's loopback listener, as a browser would."""
    cmd = [*CLI, "login", "--gateway", gateway.url, "--no-browser"]
    proc = subprocess.Popen(
        cmd, env=_env(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    said: list[str] = []
    for line in proc.stderr:
        said.append(line)
        if "/auth?" in line:
            url = line.strip()
            break
    else:
        proc.kill()
        raise AssertionError("".join(said))
    redirect_uri = parse_qs(urlsplit(url).query)["redirect_uri"][0]
    back = authorize(url, redirect_uri, login=person)
    assert httpx2.get(back, timeout=30).status_code == 200
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "".join(said) + err)


def test_an_operator_signs_the_cli_in_and_approvals_list_acts_with_it(gateway: Served, tmp_path: Path) -> None:
    config = tmp_path / "config"
    done = _login(gateway, config, "carol")
    assert done.returncode == 0, done.stderr
    assert f"signed in to {gateway.url}" in done.stdout
    stored = config / "mcp-auth.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    listed = subprocess.run(
        [*CLI, "approvals", "list", "--url", gateway.url], env=_env(config), capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert "no calls are waiting for approval" in listed.stderr
    for output in (done.stdout, done.stderr, listed.stdout, listed.stderr):
        assert "eyJ" not in output  # no token printed


def test_a_person_who_is_not_an_operator_is_told_what_would_do(gateway: Served, tmp_path: Path) -> None:
    config = tmp_path / "config"
    assert _login(gateway, config, "dave").returncode == 0
    listed = subprocess.run(
        [*CLI, "approvals", "list", "--url", gateway.url], env=_env(config), capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 1
    assert "refused the operator credential this command sent" in listed.stderr
    assert "AGENT_SDK_OPERATOR_TOKEN" in listed.stderr and f"agent-sdk login --gateway {gateway.url}" in listed.stderr


def test_without_a_credential_the_error_names_the_variable_and_the_login_command(
    gateway: Served, tmp_path: Path
) -> None:
    listed = subprocess.run(
        [*CLI, "approvals", "list", "--url", gateway.url],
        env=_env(tmp_path / "empty"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 1
    assert "needs an operator credential and this command has none" in listed.stderr
    assert "AGENT_SDK_OPERATOR_TOKEN" in listed.stderr and f"agent-sdk login --gateway {gateway.url}" in listed.stderr
    assert "***" not in listed.stderr
