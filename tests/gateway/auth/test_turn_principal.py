"""A turn's `session.principal`: two people signed in with OAuth (oidc-provider, real) and a service with a
static token run turns on a real `agent-sdk serve`; the project's per-session `auth` callback sends
`session.principal.oauth.subject` upstream (an `mcp` 2.x server that answers with the header it got), and
an authored tool (`whoami`) reads the principal's issuer, subject, scopes and client id. Each sees its own
caller, on a first turn and on a follow-up, and on a turn the agent endpoint's `ask` starts.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.conftest import free_port
from tests.processes import running

from ..conftest import Served, assert_clean, make_project, serve
from ..oauth_peers import WHOAMI, Issuer, person_token

HEADER_ECHO = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "header_echo.py"
SERVICE = "the-service-token-0123456789"


def _connection(port: int) -> str:
    return (
        "from connections import define_connection\n\n\n"
        "async def auth(session):\n"
        "    oauth = getattr(session.principal, 'oauth', None)\n"
        "    who = oauth.subject if oauth is not None else f'{getattr(session.principal, \"kind\", None)}'\n"
        "    return {'headers': {'X-Caller': who}}\n\n\n"
        f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', auth=auth, advertise_tools=True)\n"
    )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, idp: Issuer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("turn-principal")
    port = free_port()
    with running([sys.executable, str(HEADER_ECHO), "--port", str(port)], port=port):
        project = make_project(root / "project", {"who": _connection(port)}, tools=False)
        (project / "agent" / "tools").mkdir(parents=True, exist_ok=True)
        shutil.copy(WHOAMI, project / "agent" / "tools" / "whoami.py")
        served = serve(project, root / "state", "--oauth-issuer", idp.url, "--bearer-token", SERVICE)
        try:
            yield served
        finally:
            served.stop()
    assert_clean(served.log_text())


def _turn(gateway: Served, token: str, session: dict[str, str] | None = None) -> dict[str, Any]:
    """One turn calling `caller` and `whoami`; the results by tool name, and the session to follow up."""
    message = "call caller {}\ncall whoami {}"
    with gateway.client({"Authorization": f"Bearer {token}"}) as http:
        start = 0
        if session is None:
            answer = http.post("/v1/session", json={"message": message})
        else:
            start = len(
                http.get(f"/v1/session/{session['sessionId']}/events", params={"format": "json"}).json()["events"]
            )
            body = {"message": message, "continuationToken": session["continuationToken"]}
            answer = http.post(f"/v1/session/{session['sessionId']}", json=body)
        assert answer.status_code == 200, answer.text
        handle = answer.json()
        results: dict[str, Any] = {}
        with http.stream("GET", f"/v1/session/{handle['sessionId']}/stream", params={"startIndex": start}) as lines:
            for line in lines.iter_lines():
                event = json.loads(line) if line.strip() else {}
                if event.get("type") == "action.result":
                    result = event["data"]["result"]
                    text = result.get("content", [{}])[0].get("text") if event["data"]["toolName"] == "caller" else None
                    results[event["data"]["toolName"]] = text if text is not None else result
                if event.get("type") in ("turn.completed", "turn.failed"):
                    assert event["type"] == "turn.completed", event
                    break
    return {"results": results, "session": {k: handle[k] for k in ("sessionId", "continuationToken")}}


def test_a_turns_auth_callback_and_authored_tools_see_the_callers_principal(gateway: Served, idp: Issuer) -> None:
    people = {login: person_token(idp.url, gateway.url, login) for login in ("alice", "bob")}
    for login, token in people.items():
        first = _turn(gateway, token)
        assert first["results"]["caller"] == f"caller={login}"  # the upstream saw this person
        who = first["results"]["whoami"]
        assert who["subject"] == login and who["issuer"] == idp.url and who["kind"] == "oauth"
        assert "mcp:tools" in who["scopes"] and who["clientId"]
        assert who["auth"].startswith("oauth:")
        again = _turn(gateway, token, first["session"])  # a follow-up: the request that starts it is the caller
        assert again["results"]["caller"] == f"caller={login}"
        assert again["results"]["whoami"]["subject"] == login
    service = _turn(gateway, SERVICE)
    assert service["results"]["caller"] == "caller=bearer"
    assert service["results"]["whoami"]["kind"] == "bearer" and service["results"]["whoami"]["subject"] is None


def test_a_turn_the_agent_endpoints_ask_starts_sees_its_caller(gateway: Served, idp: Issuer) -> None:
    token = person_token(idp.url, gateway.url, "carol")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    call = {"name": "ask", "arguments": {"message": "call caller {}", "waitMs": 30000}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    answer = httpx2.post(f"{gateway.url}/v1/mcp", json=body, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    asked = answer.json()["result"]["structuredContent"]
    assert asked["status"] != "running", asked
    with gateway.client({"Authorization": f"Bearer {token}"}) as http:
        events = http.get(f"/v1/session/{asked['sessionId']}/events", params={"format": "json"}).json()["events"]
    results = [e["data"]["result"] for e in events if e["type"] == "action.result"]
    assert [r["content"][0]["text"] for r in results] == ["caller=carol"]
