"""OAuth principals under a policy: people signed in at oidc-provider (real, PKCE) are decided by their
token's claims (a string claim is a tag), and a token with a `groups` claim by its groups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from ..conftest import Served, Upstream, assert_clean, make_project, serve
from ..oauth_peers import Issuer, claims_for, mint, person_token

POLICY = """\
permit(principal, action == AgentSdk::Action::"tools/list", resource)
when { principal.kind == "oauth" && principal.scopes.contains("mcp:tools") };
@id("ada-echoes")
permit(principal, action == AgentSdk::Action::"tools/call", resource == AgentSdk::Tool::"echo")
when { principal.hasTag("sub") && principal.getTag("sub") == "ada" };
@id("analysts-sum")
permit(principal, action == AgentSdk::Action::"tools/call", resource == AgentSdk::Tool::"get-sum")
when { principal.groups.contains("analysts") && principal.issuer != "" };
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("policy-oauth")
    definition = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True)\n"
    )
    project = make_project(root / "project", {"everything": definition}, tools=False)
    (project / "agent" / "policies.cedar").write_text(POLICY)
    served = serve(project, root / "state", "--oauth-issuer", idp.url)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def _rpc(gateway: Served, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    answer = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _tools(gateway: Served, token: str) -> set[str]:
    return {t["name"] for t in _rpc(gateway, token, "tools/list", {})["result"]["tools"]}


def test_people_and_groups_get_what_their_claims_allow(gateway: Served, idp: Issuer) -> None:
    resource = f"{gateway.url}/v1/mcp/tools"
    ada, bob = person_token(idp.url, resource, "ada"), person_token(idp.url, resource, "bob")
    analyst = mint(idp.key, claims_for(idp.url, resource, groups=["analysts", 7]))  # a non-string group is left out
    assert _tools(gateway, ada) == {"echo"}
    assert _tools(gateway, bob) == set()
    assert _tools(gateway, analyst) == {"get-sum"}
    echoed = _rpc(gateway, ada, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    assert not echoed["result"].get("isError") and "hi" in echoed["result"]["content"][0]["text"]
    refused = _rpc(gateway, bob, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    assert refused["error"]["code"] == -32602 and refused["error"]["message"] == "Unknown tool: echo"
    summed = _rpc(gateway, analyst, "tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}})
    assert not summed["result"].get("isError") and "3" in summed["result"]["content"][0]["text"]
