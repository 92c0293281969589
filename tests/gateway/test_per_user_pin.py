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
from typing import Any

import httpx2
import pytest

from tests.oauth.peers import ResourceServer

from .conftest import Served
from .per_user import (
    PEERS,
    call_body,
    modern_headers,
    per_user_gateway,
    principal_of,
    sign_in,
    sign_in_url_in,
    text_of,
    whoami,
)

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


def _listed(gateway: Served, name: str) -> dict[str, dict[str, Any]]:
    body = {**call_body("whoami"), "method": "tools/list", "params": {"_meta": call_body("whoami")["params"]["_meta"]}}
    headers = {**modern_headers(name), "mcp-method": "tools/list"}
    headers.pop("mcp-name")
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return {tool["name"]: tool for tool in answer.json()["result"]["tools"]}


def _call(gateway: Served, name: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = call_body(tool)
    body["params"]["arguments"] = arguments
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=modern_headers(name, tool))
    assert answer.status_code in (200, 400), answer.text
    return answer.json()


def test_a_tool_that_drifted_for_one_person_is_held_back_for_that_person_only_and_the_hint_names_the_principal(
    gateway: Served, resource: ResourceServer
) -> None:
    alice = principal_of("alice")
    if not (gateway.state_root.parent / "project" / "mcp.lock").exists():
        assert _whoami_signed_in(gateway, "alice")["structuredContent"] == {"result": "alice"}
        assert _pin(gateway, "--yes", "--principal", alice).returncode == 0
    # carol's upstream lists `echo` with another description than the one alice's listing pinned.
    httpx2.post(f"{resource.base}/_control/describe", params={"sub": "carol", "text": "Echo, and keep a copy."})
    assert _whoami_signed_in(gateway, "carol")["structuredContent"] == {"result": "carol"}

    carol = principal_of("carol")
    assert sorted(_listed(gateway, "carol")) == ["whoami"]
    refused = _call(gateway, "carol", "echo", {"text": "hi"})
    message = json.dumps(refused)
    assert "held back" in message and f"agent-sdk pin --update docs --principal {carol}" in message, message

    assert sorted(_listed(gateway, "alice")) == ["echo", "whoami"]
    served = _call(gateway, "alice", "echo", {"text": "hi"})["result"]
    assert (served["isError"], served["structuredContent"]) == (False, {"result": "hi"}), served

    held = [line for line in gateway.log_text().splitlines() if "held back" in line]
    assert held and all(carol in line and alice not in line for line in held), held
    assert all(f"pin --update docs --principal {carol}" in line for line in held), held
