"""A per-person connection's tool through a curated server (docs/curated-servers.md): oidc-provider as the
upstream's authorization server, the audience-checking `mcp` 2.x resource server whose `whoami` answers the
subject of each call's token, and the TypeScript SDK peer in both generations. A caller who has not signed in
is answered, through `/v1/mcp/servers/<name>`, with its own sign-in link, as on `/v1/mcp/tools`; once signed
in, its retry reaches the upstream with its own grant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.oauth.peers import ResourceServer

from .conftest import Served, assert_clean, serve
from .per_user import (
    JSON_HEADERS,
    MODERN,
    PEERS,
    assert_asked_then_served,
    call_body,
    modern_headers,
    peer_env,
    per_user_project,
    sign_in_url_in,
    text_of,
    ts_peer_signs_in,
)

MINE = """\
from connections import define_server

server = define_server(tools=[{"connection": "docs", "name": "whoami", "description": "Who signed in."}])
"""
FIND = """\
from connections import define_server

server = define_server(discovery=True, tools=[{"connection": "docs", "name": "whoami", "rename": "who"}])
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("per-user-curated")
    project: Path = per_user_project(root / "project", resource.url)
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "mine.py").write_text(MINE)
    (project / "agent" / "servers" / "find.py").write_text(FIND)
    served = serve(project, root / "state", env=peer_env())
    yield served
    served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


def _asked_to_sign_in(answer: httpx2.Response, base: str) -> None:
    """A call's answer is the error result naming `docs` with the caller's own sign-in URL."""
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True
    text = text_of(result)
    assert "sign_in_required" in text and "'docs'" in text
    assert sign_in_url_in(text).startswith(f"{base}/v1/oauth/sign-in?ticket=agent-sdk.signin1.")


def test_a_call_through_a_curated_server_answers_with_the_callers_sign_in_link(gateway: Served) -> None:
    url = f"{gateway.url}/v1/mcp/servers/mine"
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(url, json=call_body("whoami"), headers=modern_headers("alice"))
        meta = call_body("whoami")["params"]["_meta"]
        listed = http.post(
            url,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
            headers={**JSON_HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/list",
                     "authorization": f"Bearer {PEERS['alice']}"},
        )  # fmt: skip
    _asked_to_sign_in(answer, gateway.url)
    assert listed.status_code == 200, listed.text
    assert "docs" in str(listed.json()["result"].get("_meta", {}))  # the listing names the sign-in it needs


def test_call_tool_of_a_curated_server_in_discovery_mode_answers_with_the_sign_in_link(gateway: Served) -> None:
    body = call_body("call_tool")
    body["params"]["arguments"] = {"name": "who", "arguments": {}}
    with httpx2.Client(timeout=30.0) as http:
        answer = http.post(
            f"{gateway.url}/v1/mcp/servers/find", json=body, headers=modern_headers("frank", "call_tool")
        )
    _asked_to_sign_in(answer, gateway.url)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("era", "name", "version"), [("legacy", "dave", "2025-11-25"), ("modern", "erin", "2026-07-28")]
)
async def test_the_typescript_peer_signs_in_through_a_curated_server_and_its_retry_succeeds(
    gateway: Served, era: str, name: str, version: str
) -> None:
    report = await ts_peer_signs_in(f"{gateway.url}/v1/mcp/servers/mine", name, era)
    assert_asked_then_served(report, gateway.url, name, era, version)
