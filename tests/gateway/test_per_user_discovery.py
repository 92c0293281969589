"""Discovery mode (docs/discovery.md, "Per-person connections") with a per-user connection, against oidc-provider,
the audience-checking MCP server and a real `agent-sdk serve --discovery` with a Cedar policy: everyone may call
`whoami`, only alice `echo`.

alice signs in and the operator pins `docs` from her listing (`agent-sdk pin --principal`). bob, dave and erin
never signed in: a search finds `whoami` from the lock's reviewed definition (never `echo`, which the policy hides
from them), and `call_tool whoami` through the TypeScript SDK answers with the caller's own sign-in link (-32042 at
2025-11-25, an `input_required` URL elicitation at 2026-07-28); once signed in, the retried call runs as them."""

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

from .conftest import Served, assert_clean, serve
from .per_user import (
    PEERS,
    TS_ERAS,
    assert_asked_then_served,
    modern_call,
    peer_env,
    per_user_project,
    principal_of,
    sign_in,
    sign_in_url_in,
    text_of,
    ts_peer_signs_in,
    whoami,
)

ACCESS_TOKEN_TTL = 3600


def _policy() -> str:
    alice = principal_of("alice")
    return f"""\
@id("alice-all")
permit(principal == AgentSdk::Principal::"{alice}", action, resource);
@id("everyone-lists")
permit(principal, action == AgentSdk::Action::"tools/list", resource);
@id("everyone-whoami")
permit(principal, action == AgentSdk::Action::"tools/call", resource == AgentSdk::Tool::"whoami");
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("per-user-discovery")
    project = per_user_project(root / "project", resource.url)
    (project / "agent" / "policies.cedar").write_text(_policy())
    served = serve(project, root / "state", "--discovery", env=peer_env())
    try:
        with httpx2.Client(timeout=30.0) as http:
            first = whoami(http, served.url, "alice")
            assert first["isError"] and "Signed in" in sign_in(sign_in_url_in(text_of(first)), "alice").text
        where = ["--dir", str(project), "--state-root", str(served.state_root)]
        pin = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "pin", *where]
        written = subprocess.run(
            [*pin, "--yes", "--principal", principal_of("alice")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=dict(os.environ),
        )
        assert written.returncode == 0, written.stderr
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


def _meta_call(gateway: Served, name: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return modern_call(gateway.url, name, tool, arguments)


def test_a_caller_not_signed_in_finds_the_pinned_tools_the_policy_shows_and_never_a_hidden_one(
    gateway: Served,
) -> None:
    answers: list[str] = []
    whoami_found: dict[str, Any] = {}
    for query, expected in (("the subject of my access token", ["whoami"]), ("echo the text back", [])):
        answer = _meta_call(gateway, "bob", "search_tools", {"query": query})
        answers.append(json.dumps(answer))
        assert answer["result"]["isError"] is False, answer
        found = answer["result"]["structuredContent"]["tools"]
        assert [t["name"] for t in found] == expected, found
        if expected:
            whoami_found = found[0]
    lock = json.loads((gateway.state_root.parent / "project" / "mcp.lock").read_text())
    [digest] = [d for n, d in lock["connections"]["docs"]["tools"].items() if n == "whoami"]
    assert whoami_found["description"] == lock["definitions"][digest]["description"]  # the reviewed definition
    described = _meta_call(gateway, "bob", "describe_tool", {"name": "whoami"})["result"]
    assert described["structuredContent"]["name"] == "whoami", described
    hidden = _meta_call(gateway, "bob", "describe_tool", {"name": "echo"})["result"]
    assert hidden["isError"] is True and text_of(hidden) == "Unknown tool: echo", hidden
    assert all('"echo"' not in a and "Echo the text" not in a for a in answers), answers
    # alice, signed in, finds both from her live listing
    mine = _meta_call(gateway, "alice", "search_tools", {"query": "echo the text back"})["result"]
    assert "echo" in [t["name"] for t in mine["structuredContent"]["tools"]], mine


@pytest.mark.anyio
@pytest.mark.parametrize(("era", "name", "version"), TS_ERAS)
async def test_call_tool_of_a_tool_found_before_sign_in_answers_with_the_callers_sign_in_link(
    gateway: Served, era: str, name: str, version: str
) -> None:
    searched = _meta_call(gateway, name, "search_tools", {"query": "the subject of my access token"})
    assert [t["name"] for t in searched["result"]["structuredContent"]["tools"]] == ["whoami"], searched
    called = {"name": "whoami", "arguments": {}}
    report = await ts_peer_signs_in(f"{gateway.url}/v1/mcp/tools", name, era, tool="call_tool", arguments=called)
    assert_asked_then_served(report, gateway.url, name, era, version)  # the retried call_tool ran whoami as name
