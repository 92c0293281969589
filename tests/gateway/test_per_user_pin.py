"""Pinning a per-user connection (docs/connections.md, "Pinning per-user connections"), against oidc-provider,
the audience-checking MCP server and a real `agent-sdk serve`.

alice signs in through the link her first call is answered with; the operator pins `docs` from alice's
listing (`agent-sdk pin --principal <alice> --state-root <the gateway's>`), `pin --check` is green, and the
running gateway checks bob's own listing against the same lock: his `whoami` is served, not held back.
Without `--principal` the pin names what to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx2
import pytest

from tests.oauth.peers import ResourceServer

from .conftest import Served
from .per_user import PEERS, per_user_gateway, principal_of, sign_in, sign_in_url_in, text_of, whoami

ACCESS_TOKEN_TTL = 3600


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    with per_user_gateway(tmp_path_factory.mktemp("per-user-pin"), resource.url) as served:
        yield served


def _pin(served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--dir", str(served.state_root.parent / "project"), "--state-root", str(served.state_root)]
    command = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "pin", *where, *args]
    env = {**os.environ, "AGENT_SDK_DEBUG": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)


def _whoami_signed_in(gateway: Served, name: str) -> dict[str, object]:
    with httpx2.Client(timeout=30.0) as http:
        first = whoami(http, gateway.url, name)
        if first["isError"]:
            page = sign_in(sign_in_url_in(text_of(first)), name)
            assert page.status_code == 200 and "Signed in" in page.text, page.text
            return whoami(http, gateway.url, name)
    return first


def test_pin_and_pin_check_work_with_a_per_user_connection_and_each_person_is_checked_against_the_lock(
    gateway: Served,
) -> None:
    refused = _pin(gateway, "--yes")
    assert refused.returncode == 1
    assert "grants='per_principal'" in refused.stderr and "--principal" in refused.stderr, refused.stderr

    assert _whoami_signed_in(gateway, "alice")["structuredContent"] == {"result": "alice"}
    alice = principal_of("alice")
    written = _pin(gateway, "--yes", "--principal", alice)
    assert written.returncode == 0, written.stderr
    lock = json.loads((gateway.state_root.parent / "project" / "mcp.lock").read_text())
    assert sorted(lock["connections"]["docs"]["tools"]) == ["echo", "whoami"]

    checked = _pin(gateway, "--check", "--principal", alice)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 drift(s) in 1 connection(s)" in checked.stderr
    updated = _pin(gateway, "--update", "docs", "--yes", "--principal", alice)
    assert updated.returncode == 0 and "is up to date" in updated.stderr, updated.stderr

    # bob's own listing, checked against the lock alice's listing wrote: nothing held back.
    answered = _whoami_signed_in(gateway, "bob")
    assert (answered["isError"], answered["structuredContent"]) == (False, {"result": "bob"}), answered
    assert "held back" not in gateway.log_text()
    assert all(token not in written.stdout + written.stderr for token in PEERS.values())
