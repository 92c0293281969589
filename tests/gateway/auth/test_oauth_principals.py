"""Two people signed in with OAuth (oidc-provider, real) are two principals on `/v1/mcp/tools`: a task
one of them started (server-everything's `simulate-research-query`, which runs only as a task) is not
the other's to read, fetch or cancel; nor are one's handshake session and its subscriptions, or one's
session-API sessions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from ..conftest import Served, Upstream, assert_clean, make_project, serve
from ..oauth_peers import Issuer, person_token

RESEARCH = "simulate-research-query"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("oauth-principals")
    everything_with_resources = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, advertise_resources=True)\n"
    )
    project = make_project(root / "project", {"everything": everything_with_resources})
    served = serve(project, root / "state", "--oauth-issuer", idp.url)
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def _post(
    gateway: Served, token: str, method: str, params: dict[str, Any], session: str | None = None
) -> httpx2.Response:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    answer = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer


def _rpc(
    gateway: Served, token: str, method: str, params: dict[str, Any], session: str | None = None
) -> dict[str, Any]:
    return _post(gateway, token, method, params, session).json()


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


def test_one_persons_handshake_session_and_subscriptions_and_sessions_are_not_anothers(
    gateway: Served, idp: Issuer
) -> None:
    resource = f"{gateway.url}/v1/mcp/tools"
    ada, bob = person_token(idp.url, resource, "ada"), person_token(idp.url, resource, "bob")
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "ada", "version": "1"}}
    session = _post(gateway, ada, "initialize", hello).headers["mcp-session-id"]
    uri = _rpc(gateway, ada, "resources/list", {})["result"]["resources"][0]["uri"]
    assert _rpc(gateway, ada, "resources/subscribe", {"uri": uri}, session) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    # Bob holding Ada's session id: his subscribe and unsubscribe are refused as an unknown session (404, so a
    # client starts its own: Streamable HTTP), and so is her stream.
    for method in ("resources/subscribe", "resources/unsubscribe"):
        body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"uri": uri}}
        headers = {"Authorization": f"Bearer {bob}", "MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": session}
        headers["Accept"] = "application/json, text/event-stream"
        answer = httpx2.post(resource, json=body, headers=headers, timeout=60)
        refused = answer.json()
        assert answer.status_code == 404, answer.text
        assert "result" not in refused and "not issued by this gateway to this caller" in refused["error"]["message"]
    kept = _rpc(gateway, ada, "resources/unsubscribe", {"uri": uri}, session)  # her session outlived his tries
    assert kept == {"jsonrpc": "2.0", "id": 7, "result": {}}
    stream = httpx2.get(
        resource,
        headers={"Authorization": f"Bearer {bob}", "Accept": "text/event-stream", "Mcp-Session-Id": session},
        timeout=30,
    )
    assert stream.status_code in (400, 403, 404) and "not issued by this gateway to this caller" in stream.text
    # The session API (tokens for the gateway's base URL, the audience of its JSON API): Ada's session is hers.
    ada, bob = person_token(idp.url, gateway.url, "ada"), person_token(idp.url, gateway.url, "bob")
    made = httpx2.post(
        f"{gateway.url}/v1/session", json={"message": "hello"}, headers={"Authorization": f"Bearer {ada}"}, timeout=60
    )
    assert made.status_code == 200, made.text
    theirs = made.json()["sessionId"]
    peeked = httpx2.get(
        f"{gateway.url}/v1/session/{theirs}/events", headers={"Authorization": f"Bearer {bob}"}, timeout=30
    )
    assert peeked.status_code == 403, peeked.text
    listed = httpx2.get(f"{gateway.url}/v1/sessions", headers={"Authorization": f"Bearer {bob}"}, timeout=30)
    assert theirs not in listed.text
