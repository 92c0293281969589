"""A hub attacked as an outsider and as a key holder (issue #22): one real `agent-sdk serve --hub`.

The hub links a stdio `server-everything` (whose `get-env` dumps its environment) and a Streamable
HTTP one whose header reads `${REMOTE_SECRET}`; it also has a non-linkable connection, a `bridge=True`
child (tests/fixtures/upstreams/bridge_client.py) and an account connection to itself, so its
process holds a hub API key and a bridge secret. nginx fronts it the way docs/accounts.md says.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.conftest import free_port
from tests.connections.client.test_fast_calls import nginx
from tests.gateway.accounts.test_accounts import BRIDGE_CLIENT, cli, create_key, write
from tests.peers import node_bin

from ..conftest import Served, Upstream, serve

BEARER = "hub-operator-token-" + "b" * 24
REMOTE_SECRET = "remote-header-secret-" + "r" * 24
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@dataclass
class HardHub:
    served: Served
    key: str
    """A hub key of account 'team' (every linkable connector)."""
    own_key: str
    """The key the hub itself holds in AGENT_SDK_API_KEY (its account connection `acct` is itself)."""

    @property
    def url(self) -> str:
        return self.served.url


@pytest.fixture(scope="module")
def hard_hub(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[HardHub]:
    root = tmp_path_factory.mktemp("hardhub")
    project, state_root = root / "project", root / "state"
    server = str(node_bin("mcp-server-everything"))
    write(project, "mcp-connections", "local", f"connection = define_connection(command={server!r}, args=['stdio'], "
          "linkable=True)")  # fmt: skip
    write(project, "mcp-connections", "remote", f"connection = define_connection(url={everything.url!r}, "
          "headers={'X-Api-Key': '${REMOTE_SECRET}'}, linkable=True)")  # fmt: skip
    write(project, "mcp-connections", "private", f"connection = define_connection(command={server!r}, "
          "args=['stdio'], advertise_tools=True)")  # fmt: skip
    write(project, "mcp-connections", "bridge_user", f"connection = define_connection(command={sys.executable!r}, "
          f"args=[{str(BRIDGE_CLIENT)!r}], bridge=True, advertise_tools=True)")  # fmt: skip
    write(project, "host-connections", "acct", "connection = define_connection(account=True, servers=['remote'])")
    _id, key = create_key(project, state_root, "team", "--all")
    _id, own_key = create_key(project, state_root, "self", "--connectors", "remote")
    port = free_port()
    env = {
        "AGENT_SDK_BEARER_TOKEN": BEARER,
        "REMOTE_SECRET": REMOTE_SECRET,
        "AGENT_SDK_ACCOUNT_URL": f"http://127.0.0.1:{port}",
        "AGENT_SDK_API_KEY": own_key,
    }
    served = serve(project, state_root, "--hub", env=env, port=port)
    try:
        yield HardHub(served, key, own_key)
    finally:
        served.stop()


def rpc(base: str, path: str, method: str, params: dict[str, Any], **headers: str) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    with httpx2.Client(base_url=base, timeout=60) as http:
        return http.post(path, json=body, headers={**MCP_HEADERS, **headers})


def bridge_secret(hub: HardHub) -> str:
    with httpx2.Client(base_url=hub.url, timeout=60) as http:
        answer = http.post("/v1/tools/bridge_env", json={"input": {}}, headers={"Authorization": f"Bearer {BEARER}"})
    assert answer.status_code == 200, answer.text
    secret = json.loads(answer.json()["result"]["content"][0]["text"])["secret"]
    assert isinstance(secret, str) and len(secret) >= 40  # the opted-in child does get it
    return secret


# -- #22.2: bridge variables only for the children that opt in ------------------------------------------------


def test_a_linkable_stdio_connector_gets_no_bridge_secret_no_key_and_no_other_header(hard_hub: HardHub) -> None:
    secret = bridge_secret(hard_hub)
    called = rpc(hard_hub.url, "/v1/hub/connectors/local/mcp", "tools/call", {"name": "get-env", "arguments": {}},
                 Authorization=f"Bearer {hard_hub.key}")  # fmt: skip
    assert called.status_code == 200, called.text
    result = called.json()["result"]
    assert result.get("isError") is not True, result
    environment = json.loads(result["content"][0]["text"])
    assert "PATH" in environment  # it is the child's real environment
    assert not [k for k in environment if k.startswith("AGENT_SDK_")], sorted(environment)
    dumped = called.text
    for value in (secret, hard_hub.key, hard_hub.own_key, REMOTE_SECRET, BEARER):
        assert value not in dumped
    # A child that did not opt in (bridge=True) gets nothing either, linkable or not.
    with httpx2.Client(base_url=hard_hub.url, timeout=60) as http:
        private = http.post("/v1/tools/get-env", json={"input": {}}, headers={"Authorization": f"Bearer {BEARER}"})
    assert private.status_code == 200 and private.json()["isError"] is False, private.text
    assert "PATH" in private.text and "AGENT_SDK_" not in private.text and secret not in private.text


# -- #22.1: behind nginx, an anonymous caller reaches nothing ---------------------------------------------------

DOCUMENTED_FRONT = """
                location / {{
                    proxy_pass http://127.0.0.1:{port};
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_buffering off;
                    client_max_body_size 4m;
                }}"""
STOCK_FRONT = "location / {{ proxy_pass http://127.0.0.1:{port}; }}"


@pytest.mark.parametrize("front", [DOCUMENTED_FRONT, STOCK_FRONT], ids=["documented", "stock"])
def test_an_anonymous_request_through_nginx_reaches_nothing(
    hard_hub: HardHub, front: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    secret = bridge_secret(hard_hub)
    call_private = 'call mcp_call_tool {"connection": "private", "tool": "get-env", "arguments": {}}'
    with nginx(tmp_path_factory.mktemp("hubfront"), front.format(port=hard_hub.served.port)) as port:
        base = f"http://127.0.0.1:{port}"
        with httpx2.Client(base_url=base, timeout=60) as http:
            answers = {
                "info": http.get("/v1/info"),
                "sessions": http.get("/v1/sessions"),
                "session": http.post("/v1/session", json={"message": call_private}),
                "tools": http.get("/v1/tools"),
                "tool call": http.post("/v1/tools/bridge_env", json={"input": {}}),
                "hub list": http.get("/v1/hub/connectors"),
            }
        answers |= {
            "agent mcp": rpc(base, "/v1/mcp", "tools/list", {}),
            "tools mcp": rpc(base, "/v1/mcp/tools", "tools/call", {"name": "bridge_env", "arguments": {}}),
            "bridge": rpc(base, "/v1/account/acct/mcp", "tools/list", {}),
            "connector": rpc(base, "/v1/hub/connectors/local/mcp", "tools/call", {"name": "get-env", "arguments": {}}),
            "non-linkable": rpc(base, "/v1/hub/connectors/private/mcp", "tools/list", {}),
        }
        for what, answer in answers.items():
            assert answer.status_code in (401, 403, 404), (what, answer.status_code, answer.text)
            for leaked in ("get-sum", "PATH", secret, REMOTE_SECRET, '"bridge_env"'):
                assert leaked not in answer.text, (what, leaked, answer.text)
        # The front works for those who hold a credential: a key for the hub API, the token for the rest.
        keyed = rpc(base, "/v1/hub/connectors/remote/mcp", "tools/list", {}, Authorization=f"Bearer {hard_hub.key}")
        assert keyed.status_code == 200 and "get-sum" in keyed.text, keyed.text
        with httpx2.Client(base_url=base, timeout=60) as http:
            info = http.get("/v1/info", headers={"Authorization": f"Bearer {BEARER}"})
        assert info.status_code == 200 and info.json()["hub"]["linkable"] == ["local", "remote"], info.text
    assert list(hard_hub.served.state_root.rglob("ses_*")) == []  # no session was started


def test_serve_refuses_a_hub_without_a_bearer_token(tmp_path: Path) -> None:
    write(tmp_path / "p", "mcp-connections", "x", "connection = define_connection(url='http://127.0.0.1:9/mcp')")
    for extra, env in (([], {}), (["--allow-anonymous"], {})):
        done = cli("serve", "--dir", str(tmp_path / "p"), "--hub", "--port", "0", *extra, env=env)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert "a hub (--hub) needs --bearer-token (or AGENT_SDK_BEARER_TOKEN)" in done.stderr, done.stderr
    anonymous = cli("serve", "--dir", str(tmp_path / "p"), "--hub", "--port", "0", "--allow-anonymous")
    assert "--allow-anonymous is refused on a hub" in anonymous.stderr


# -- #22.6 / #22.7: no Host in a Location; the bridge checks Host and Origin -------------------------------------


def test_no_route_reflects_host_into_a_location(hard_hub: HardHub) -> None:
    evil = {"Host": "evil.example", "Authorization": f"Bearer {hard_hub.key}"}
    paths = ["/v1/hub/connectors/", "/v1/hub/connectors/remote/mcp/", "/v1/account/acct/mcp/", "/v1/info/",
             "/v1/tools/", "/v1/sessions/", "/v1/health/", "/v1/mcp/", "/v1/mcp/tools/"]  # fmt: skip
    with httpx2.Client(base_url=hard_hub.url, timeout=30, follow_redirects=False) as http:
        for path in paths:
            for method in ("GET", "POST"):
                answer = http.request(method, path, headers=evil)
                assert "location" not in answer.headers, (method, path, answer.headers)
                assert not 300 <= answer.status_code < 400, (method, path, answer.status_code)
                assert "evil.example" not in answer.text


def test_the_bridge_refuses_a_foreign_host_and_a_foreign_origin(hard_hub: HardHub) -> None:
    secret = bridge_secret(hard_hub)
    auth = f"Bearer {secret}"
    good = rpc(hard_hub.url, "/v1/account/acct/mcp", "tools/list", {}, Authorization=auth)
    assert good.status_code == 200 and "get-sum" in good.text, good.text
    host = rpc(hard_hub.url, "/v1/account/acct/mcp", "tools/list", {}, Authorization=auth, Host="evil.example")
    assert host.status_code == 421, host.text
    for origin in ("http://evil.example", "null"):
        refused = rpc(hard_hub.url, "/v1/account/acct/mcp", "tools/list", {}, Authorization=auth, Origin=origin)
        assert refused.status_code == 403, (origin, refused.text)
        assert "get-sum" not in refused.text
    assert secret not in hard_hub.served.log_text() and os.environ.get("AGENT_SDK_BRIDGE_SECRET") is None
