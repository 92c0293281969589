"""Two people signed in with OAuth (oidc-provider, real) are two principals on `/v1/mcp/tools`: a task
one of them started (server-everything's `simulate-research-query`, which runs only as a task) is not
the other's to read, fetch or cancel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from .conftest import Served, Upstream, assert_clean, make_project, serve, url_connection
from .oauth_peers import Issuer, person_token

RESEARCH = "simulate-research-query"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("oauth-principals")
    project = make_project(root / "project", {"everything": url_connection(everything.url)})
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


def test_one_persons_task_is_not_anothers(gateway: Served, idp: Issuer) -> None:
    resource = f"{gateway.url}/v1/mcp/tools"
    ada, bob = person_token(idp.url, resource, "ada"), person_token(idp.url, resource, "bob")
    created = _rpc(gateway, ada, "tools/call", {"name": RESEARCH, "arguments": {"topic": "mine"}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert _rpc(gateway, ada, "tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        refused = _rpc(gateway, bob, method, {"taskId": task_id})
        assert refused["error"]["code"] == -32602 and "result" not in refused
        assert "not issued to this principal" in refused["error"]["message"]
    assert _rpc(gateway, ada, "tasks/get", {"taskId": task_id})["result"]["status"] in ("working", "completed")
