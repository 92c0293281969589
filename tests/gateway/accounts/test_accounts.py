"""Account connections end to end (docs/accounts.md): two real `agent-sdk serve` processes.

The hub holds a connection to the reference `everything` server (Streamable HTTP) and one to the
audience-checking OAuth resource server of tests/oauth (tokens from a non-interactive login into
the hub's state root before it starts). The edge has `account=True` connections, logs in with
`agent-sdk login` (key in a real file keyring), and runs a stdio child that uses the bridge.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from connections import (
    AccountConnectorMissing,
    AccountToolCollision,
    Broker,
    SessionInfo,
    TurnBuildError,
    load_project,
)
from tests.conftest import free_port
from tests.oauth.peers import AuthServer, ResourceServer, oidc_provider, resource_server
from tests.peers import node_bin

from ..conftest import ROOT, Served, Upstream, everything_upstream, serve

pytestmark = pytest.mark.anyio

BRIDGE_CLIENT = ROOT / "tests" / "fixtures" / "upstreams" / "bridge_client.py"
HUB_KEYS_RE = re.compile(r"ask_[A-Za-z0-9_-]{20,}")
HUB_TOKEN = "hub-operator-token-" + "t" * 24
"""A hub needs --bearer-token for everything outside the hub API (docs/accounts.md)."""


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return subprocess.run(
        [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args],
        env={**inherited, "PYTHONPATH": str(ROOT), **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def write(root: Path, folder: str, name: str, body: str) -> None:
    path = root / "agent" / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{name}.py").write_text("from connections import define_connection\n\n" + body + "\n")


@dataclass
class Hub:
    project: Path
    state_root: Path
    port: int
    served: Served
    keys: dict[str, tuple[str, str]]
    """name -> (key id, key)"""
    oauth_tokens: list[str]

    @property
    def url(self) -> str:
        return self.served.url

    def key(self, name: str) -> str:
        return self.keys[name][1]

    def restart(self) -> None:
        self.served = serve(self.project, self.state_root, "--hub", port=self.port, env=HUB_ENV)


HUB_ENV = {"AGENT_SDK_BEARER_TOKEN": HUB_TOKEN}


def create_key(project: Path, state_root: Path, account: str, *which: str) -> tuple[str, str]:
    done = cli("hub", "keys", "create", "--dir", str(project), "--state-root", str(state_root), "--account", account,
               *which, "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["key"].startswith("ask_")
    return record["id"], record["key"]


def stored_tokens(state_root: Path) -> list[str]:
    data = json.loads((state_root / "mcp-auth.json").read_text())
    out: list[str] = []
    for per_connection in data["grants"].values():
        for record in per_connection.values():
            tokens = record["tokens"] or {}
            out += [t for t in (tokens.get("access_token"), tokens.get("refresh_token")) if t]
    return out


HUB_SUBJECT = "agent-sdk"
"""Whom the OAuth upstream's `whoami` answers for the hub's calls: the subject the hub's `--non-interactive`
login signs in as (its default user name, `oauth.follow_redirects`), so a call carrying the hub's own token."""


@pytest.fixture(scope="module")
def everything() -> Iterator[Upstream]:
    """This module's own reference server (Streamable HTTP), stopped when the module ends: later tests
    count `mcp-server-everything` processes and must not see ours."""
    with everything_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def oauth_peers() -> Iterator[tuple[AuthServer, ResourceServer]]:
    with oidc_provider(300) as auth, resource_server(auth.issuer) as resource:
        yield auth, resource


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, everything: Upstream, oauth_peers: tuple[AuthServer, ResourceServer]
) -> Iterator[Hub]:
    _auth, resource = oauth_peers
    root = tmp_path_factory.mktemp("hub")
    project, state_root = root / "project", root / "state"
    write(project, "mcp-connections", "everything", f"connection = define_connection(url={everything.url!r}, "
          "linkable=True, description='the reference server')")  # fmt: skip
    write(project, "mcp-connections", "everything_too", f"connection = define_connection(url={everything.url!r}, "
          "linkable=True)")  # fmt: skip
    write(project, "mcp-connections", "secure", f"connection = define_connection(url={resource.url!r}, oauth=True, "
          "linkable=True, deny_tools=['echo'])")  # fmt: skip
    write(project, "mcp-connections", "private", f"connection = define_connection(url={everything.url!r})")
    login = cli("mcp", "oauth", "secure", "--dir", str(project), "--state-root", str(state_root), "--non-interactive")
    assert login.returncode == 0, login.stderr
    keys = {
        "team": create_key(project, state_root, "team", "--connectors", "everything,secure"),
        "revocable": create_key(project, state_root, "team", "--connectors", "everything,secure"),
        "other": create_key(project, state_root, "other", "--connectors", "everything_too"),
        "dup": create_key(project, state_root, "dup", "--all"),
    }
    port = free_port()
    served = serve(project, state_root, "--hub", port=port, env=HUB_ENV)
    tokens = stored_tokens(state_root)
    assert tokens, "the non-interactive login stored no tokens"
    hub = Hub(project, state_root, port, served, keys, tokens)
    try:
        yield hub
    finally:
        hub.served.stop()


@dataclass
class Edge:
    served: Served
    env: dict[str, str]
    key: str


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory, hub: Hub) -> Iterator[Edge]:
    root = tmp_path_factory.mktemp("edge")
    project, state_root = root / "project", root / "state"
    write(project, "mcp-connections", "linked", "connection = define_connection(account=True, "
          "servers=['everything'], advertise_tools=True)")  # fmt: skip
    write(project, "host-connections", "team", "connection = define_connection(account=True)")
    write(project, "mcp-connections", "bridge_user", f"connection = define_connection(command={sys.executable!r}, "
          f"args=[{str(BRIDGE_CLIENT)!r}], bridge=True, advertise_tools=True)")  # fmt: skip
    env = {
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / "config"),
    }
    done = cli("login", "--url", hub.url, env=env, stdin=hub.key("team") + "\n")
    assert done.returncode == 0, done.stderr
    assert "account 'team'" in done.stdout and "everything, secure" in done.stdout
    assert hub.key("team") not in done.stdout + done.stderr
    account_file = root / "config" / "agent-sdk" / "account.json"
    assert account_file.stat().st_mode & 0o777 == 0o600
    assert hub.key("team") not in account_file.read_text()
    served = serve(project, state_root, env=env)
    try:
        yield Edge(served, env, hub.key("team"))
    finally:
        served.stop()


async def direct_call(base: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with httpx2.AsyncClient(base_url=base, timeout=60) as http:
        with anyio.fail_after(60):
            response = await http.post(f"/v1/tools/{tool}", json={"input": arguments})
    assert response.status_code == 200, response.text
    return response.json()


def text_of(envelope: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in envelope["result"].get("content", []))


async def run_turn(base: str, message: str, session: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one turn (deterministic runner): a new session, or a follow-up of `session` (which is
    updated with the rotated token). Returns the turn's closing event, with `sessionId` added."""
    async with httpx2.AsyncClient(base_url=base, timeout=60) as http:
        with anyio.fail_after(60):
            start = 0
            if session is None:
                answer = await http.post("/v1/session", json={"message": message})
            else:
                events = await http.get(f"/v1/session/{session['sessionId']}/events", params={"format": "json"})
                start = len(events.json()["events"])
                body = {"message": message, "continuationToken": session["continuationToken"]}
                answer = await http.post(f"/v1/session/{session['sessionId']}", json=body)
            assert answer.status_code == 200, answer.text
            handle = answer.json()
            if session is not None:
                session["continuationToken"] = handle["continuationToken"]
            sid = handle["sessionId"]
            stream = http.stream("GET", f"/v1/session/{sid}/stream", params={"startIndex": start})
            async with stream as lines:
                async for line in lines.aiter_lines():
                    event = json.loads(line) if line.strip() else {}
                    if event.get("type") in ("turn.completed", "turn.failed"):
                        return {**event, "sessionId": sid, "continuationToken": handle["continuationToken"]}
    raise AssertionError("the session stream ended without a closing turn event")


async def hub_rpc(hub: Hub, key: str | None, connector: str, method: str = "tools/list") -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {}}
    async with httpx2.AsyncClient(base_url=hub.url, timeout=30) as http:
        return await http.post(f"/v1/hub/connectors/{connector}/mcp", json=body, headers=headers)


# -- servers=[...] and "*" -------------------------------------------------------------------------------


async def test_servers_list_forwards_only_the_named_connector(edge: Edge) -> None:
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=60) as http:
        with anyio.fail_after(60):
            catalog = (await http.get("/v1/tools")).json()
    names = {t["name"] for t in catalog["tools"]}
    assert {"echo", "get-sum"} <= names  # from `everything`
    assert "whoami" not in names  # `secure` is linked to the account but not selected
    assert catalog["connectionErrors"] == []
    envelope = await direct_call(edge.served.url, "echo", {"message": "through the hub"})
    assert envelope["ok"] is True and envelope["isError"] is False
    assert "through the hub" in text_of(envelope)


async def test_star_forwards_every_linked_connector_through_the_bridge(edge: Edge) -> None:
    listed = await direct_call(edge.served.url, "bridge_tools", {"connection": "team"})
    names = json.loads(text_of(listed))
    assert "whoami" in names and "echo" in names and "get-sum" in names
    # `whoami` lives behind the OAuth-protected upstream: the hub calls it with its own token.
    called = await direct_call(edge.served.url, "via_bridge", {"connection": "team", "tool": "whoami"})
    assert json.loads(text_of(called)) == {"isError": False, "text": HUB_SUBJECT}
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=30) as http:
        info = (await http.get("/v1/info")).json()
    by_name = {c["name"]: c for c in info["connections"]}
    assert by_name["team"]["connectors"] == ["everything", "secure"]
    assert by_name["team"]["servers"] == "*"


# -- the bridge --------------------------------------------------------------------------------------------


async def test_bridge_needs_the_per_boot_secret(edge: Edge) -> None:
    env = json.loads(text_of(await direct_call(edge.served.url, "bridge_env", {})))
    secret = env["secret"]
    assert env["url"] == f"{edge.served.url}/v1/account" and len(secret) >= 40
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    good = {**accept, "Authorization": f"Bearer {secret}"}
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=30) as http:
        missing = await http.post("/v1/account/team/mcp", json=body, headers=accept)
        wrong = await http.post("/v1/account/team/mcp", json=body, headers={**accept, "Authorization": "Bearer nope"})
        unknown_no_secret = await http.post("/v1/account/nosuch/mcp", json=body, headers=accept)
        listed = await http.post("/v1/account/team/mcp", json=body, headers=good)
        unknown = await http.post("/v1/account/nosuch/mcp", json=body, headers=good)
        not_account = await http.post("/v1/account/bridge_user/mcp", json=body, headers=good)
        forwarded = await http.post("/v1/account/team/mcp", json=body, headers={**good, "X-Forwarded-For": "10.0.0.1"})
        get = await http.get("/v1/account/team/mcp", headers=good)
        info = await http.get("/v1/info")
    assert (missing.status_code, wrong.status_code, unknown_no_secret.status_code) == (401, 401, 401), missing.text
    assert missing.json()["error"]["data"]["error"] == "unauthorized"
    assert listed.status_code == 200 and '"whoami"' in listed.text and '"get-sum"' in listed.text, listed.text
    assert (unknown.status_code, not_account.status_code) == (404, 404), unknown.text
    assert forwarded.status_code == 403 and get.status_code == 405, forwarded.text
    assert secret not in info.text and secret not in edge.served.log_text()
    # Only the children get it: not the gateway's own environment.
    assert secret.encode() not in await anyio.Path(f"/proc/{edge.served.proc.pid}/environ").read_bytes()
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=30) as http:
        not_a_hub = await http.get("/v1/hub/connectors", headers={"Authorization": f"Bearer {edge.key}"})
    assert not_a_hub.status_code == 404, not_a_hub.text  # without --hub there is no hub API
    # The stdio child uses it the way a runtime process would: the MCP client through the bridge.
    called = await direct_call(edge.served.url, "via_bridge", {"connection": "team", "tool": "get-sum",
                                                               "arguments": {"a": 2, "b": 3}})  # fmt: skip
    assert json.loads(text_of(called))["isError"] is False and "5" in json.loads(text_of(called))["text"], called
    ok = await direct_call(edge.served.url, "bridge_status", {"connection": "team"})
    assert text_of(ok) == "200", ok


# -- accounts and keys --------------------------------------------------------------------------------------


async def test_a_key_of_another_account_sees_nothing_of_this_one(hub: Hub) -> None:
    async with httpx2.AsyncClient(base_url=hub.url, timeout=30) as http:
        other = await http.get("/v1/hub/connectors", headers={"Authorization": f"Bearer {hub.key('other')}"})
        team = await http.get("/v1/hub/connectors", headers={"Authorization": f"Bearer {hub.key('team')}"})
        bad = await http.get("/v1/hub/connectors", headers={"Authorization": "Bearer ask_not-a-key"})
        none = await http.get("/v1/hub/connectors")
        get_mcp = await http.get("/v1/hub/connectors/everything/mcp")
        info = await http.get("/v1/info", headers={"Authorization": f"Bearer {HUB_TOKEN}"})
        anonymous_info = await http.get("/v1/info")
    assert anonymous_info.status_code == 401, anonymous_info.text  # a hub never trusts loopback
    linkable = ["everything", "everything_too", "secure"]
    assert info.json()["hub"] == {"linkable": linkable, "connectors": "/v1/hub/connectors"}
    assert "ask_" not in info.text and "sha256" not in info.text
    assert HUB_KEYS_RE.search(hub.served.log_text()) is None  # no key in the hub's log either
    assert other.json() == {
        "ok": True,
        "account": "other",
        "connectors": [{"name": "everything_too", "kind": "http", "mcp": "/v1/hub/connectors/everything_too/mcp"}],
    }
    assert [c["name"] for c in team.json()["connectors"]] == ["everything", "secure"]
    assert bad.status_code == 401 and none.status_code == 401 and get_mcp.status_code == 405
    # Another account's connectors, a non-linkable connection and a made-up name all look the same: 404.
    for connector in ("everything", "secure", "private", "nosuch"):
        assert (await hub_rpc(hub, hub.key("other"), connector)).status_code == 404
    assert (await hub_rpc(hub, hub.key("team"), "private")).status_code == 404
    assert (await hub_rpc(hub, None, "everything")).status_code == 401
    listed = await hub_rpc(hub, hub.key("other"), "everything_too")
    assert listed.status_code == 200 and "get-sum" in listed.text


def edge_broker(tmp_path: Path, hub: Hub, key: str, servers: str) -> Broker:
    write(tmp_path, "mcp-connections", "acct", f"connection = define_connection(account=True, servers={servers})")
    env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": key, "PATH": os.environ["PATH"]}
    return Broker(load_project(tmp_path), environ=env)


async def test_a_server_the_account_lacks_fails_the_turn_naming_it(tmp_path: Path, hub: Hub) -> None:
    async with edge_broker(tmp_path, hub, hub.key("team"), "['everything', 'nope', 'everything_too']") as broker:
        with anyio.fail_after(60), pytest.raises(TurnBuildError) as caught:
            await broker.builder.build(SessionInfo(id="s1"))
    [problem] = caught.value.problems
    assert problem.code == "account_connector_missing" and problem.connection == "acct"
    assert "'nope', 'everything_too'" in problem.message and "it has: everything, secure" in problem.message


async def test_two_connectors_with_one_tool_name_is_an_error_naming_both(tmp_path: Path, hub: Hub) -> None:
    async with edge_broker(tmp_path, hub, hub.key("dup"), "'*'") as broker:
        with anyio.fail_after(60), pytest.raises(AccountToolCollision) as caught:
            await broker.host.mcp.list_tools("acct")
    async with edge_broker(tmp_path / "other", hub, hub.key("other"), "['secure']") as broker:
        with anyio.fail_after(60), pytest.raises(AccountConnectorMissing) as missing:
            await broker.host.mcp.call_tool("acct", "whoami", {})
    assert missing.value.missing == ("secure",) and missing.value.available == ("everything_too",)
    assert caught.value.connectors == ("everything", "everything_too")
    assert "'everything' and connector 'everything_too'" in str(caught.value)


async def test_a_revoked_key_fails_the_next_turn(tmp_path: Path, hub: Hub) -> None:
    project = tmp_path / "project"
    write(project, "mcp-connections", "acct", "connection = define_connection(account=True, servers=['everything'])")
    key_id, key = hub.keys["revocable"]
    env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": key}
    served = serve(project, tmp_path / "state", env=env)
    try:
        call = 'call mcp_call_tool {"connection": "acct", "tool": "echo", "arguments": {"message": "before"}}'
        first = await run_turn(served.url, call)
        assert first["type"] == "turn.completed", first
        done = cli("hub", "keys", "revoke", key_id, "--dir", str(hub.project), "--state-root", str(hub.state_root))
        assert done.returncode == 0 and key not in done.stdout
        second = await run_turn(served.url, call.replace("before", "after"))
        assert second["type"] == "turn.failed" and second["data"]["error"] == "turn_build_failed"
        [problem] = second["data"]["problems"]
        assert problem["code"] == "account_unauthorized" and problem["connection"] == "acct"
        assert "refused the API key (wrong or revoked)" in problem["message"]
        assert key not in served.log_text() and key not in hub.served.log_text()
    finally:
        served.stop()
    listed = cli("hub", "keys", "list", "--json", "--dir", str(hub.project), "--state-root", str(hub.state_root))
    records = {r["id"]: r for r in json.loads(listed.stdout)}
    assert records[key_id]["revoked"] is not None and "ask_" not in listed.stdout


# -- the edge never holds the upstream's OAuth token -----------------------------------------------------------


def process_memory_contains(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which of `needles` occur in the writable memory of process `pid` (heap, anonymous maps)."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("rw"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, ValueError, OverflowError):
                continue
            found.update(n for n in needles if n in chunk)
    return sorted(found)


async def test_the_edge_never_holds_the_upstream_oauth_token(edge: Edge, hub: Hub) -> None:
    called = await direct_call(edge.served.url, "via_bridge", {"connection": "team", "tool": "whoami"})
    assert json.loads(text_of(called))["text"] == HUB_SUBJECT
    tokens = hub.oauth_tokens + stored_tokens(hub.state_root)
    assert tokens
    state_files = [p for p in edge.served.state_root.rglob("*") if p.is_file()]
    for path in state_files:
        content = path.read_bytes()
        assert not any(t.encode() in content for t in tokens), path
    assert not (edge.served.state_root / "mcp-auth.json").exists()
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=30) as http:
        info = (await http.get("/v1/info")).text
    environ = await anyio.Path(f"/proc/{edge.served.proc.pid}/environ").read_bytes()
    log = edge.served.log_text()
    for token in tokens:
        assert token not in info and token.encode() not in environ and token not in log
    assert edge.key not in info and edge.key not in log and edge.key.encode() not in environ
    # The strongest check: not one byte of any upstream token in the edge process's memory. The same
    # scan finds the edge's own API key there, and the hub's token in the hub: it does see what is held.
    assert process_memory_contains(edge.served.proc.pid, [t.encode() for t in tokens]) == []
    assert process_memory_contains(edge.served.proc.pid, [edge.key.encode()]) == [edge.key.encode()]
    assert process_memory_contains(hub.served.proc.pid, [t.encode() for t in tokens]) != []


def test_validate_warns_about_servers_the_account_lacks_when_it_can_ask(tmp_path: Path, hub: Hub) -> None:
    project = tmp_path / "project"
    write(project, "mcp-connections", "acct", "connection = define_connection(account=True, "
          "servers=['everything', 'nope'])")  # fmt: skip
    env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": hub.key("team")}
    done = cli("validate", "--dir", str(project), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"agent/mcp-connections/acct.py:3: warning: connection 'acct': the account at {hub.url} has no linked "
        "connector 'nope' (it has: everything, secure); its turns fail until it is linked or removed from servers=[...]"
    )
    assert "1 warning(s)" in done.stderr and hub.key("team") not in done.stdout + done.stderr
    # A hub that cannot be asked is a note, never a failure of validate.
    down = cli("validate", "--dir", str(project), env={**env, "AGENT_SDK_ACCOUNT_URL": "http://127.0.0.1:9"})
    assert down.returncode == 0 and down.stdout == ""
    assert (
        "account servers not checked: cannot reach http://127.0.0.1:9 (connection refused or unreachable)"
        in down.stderr
    )


def test_info_shows_the_connectors_each_account_connection_resolves_to(tmp_path: Path, hub: Hub) -> None:
    project = tmp_path / "project"
    write(project, "mcp-connections", "named", "connection = define_connection(account=True, "
          "servers=['everything', 'nope'])")  # fmt: skip
    write(project, "mcp-connections", "every", "connection = define_connection(account=True)")
    env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": hub.key("team")}
    done = cli("info", "--dir", str(project), "--json", env=env)
    assert done.returncode == 0, done.stderr
    found = {c["name"]: c["connectors"] for c in json.loads(done.stdout)["connections"]}
    assert found == {"named": ["everything"], "every": ["everything", "secure"]}
    table = cli("info", "--dir", str(project), env=env)
    assert "servers: * -> everything, secure" in table.stdout
    assert hub.key("team") not in done.stdout + done.stderr + table.stdout + table.stderr
    # No hub to ask: the connectors are unknown (null), with a note on stderr for the table.
    down = cli("info", "--dir", str(project), env={**env, "AGENT_SDK_ACCOUNT_URL": "http://127.0.0.1:9"})
    assert down.returncode == 0 and "account connectors not resolved: cannot reach" in down.stderr


def test_mcp_debug_commands_reach_an_account_connection(tmp_path: Path, hub: Hub) -> None:
    project = tmp_path / "project"
    write(project, "mcp-connections", "acct", "connection = define_connection(account=True, servers=['secure'])")
    env = {"AGENT_SDK_ACCOUNT_URL": hub.url, "AGENT_SDK_API_KEY": hub.key("team")}
    tools = cli("mcp", "tools", "acct", "--dir", str(project), "--json", env=env)
    assert tools.returncode == 0, tools.stderr
    assert [t["name"] for t in json.loads(tools.stdout)] == ["whoami"]  # the hub denies `echo` on `secure`
    called = cli("mcp", "call", "acct", "whoami", "--dir", str(project), env=env)
    assert called.returncode == 0 and HUB_SUBJECT in called.stdout
    refused = cli("mcp", "call", "acct", "whoami", "--dir", str(project), env={**env, "AGENT_SDK_API_KEY": "ask_x"})
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"connection 'acct': the account hub {hub.url} refused the API key (wrong or revoked)" in refused.stderr


def inspector(tmp_path: Path, url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The MCP Inspector CLI (a client we did not write; it negotiates the 2025-11-25 handshake)."""
    return subprocess.run(
        [str(node_bin("mcp-inspector")), "--cli", url, "--transport", "http", "--format", "json", "-q",
         "--header", f"Authorization: Bearer {token}", *args],
        env={**os.environ, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )  # fmt: skip


def test_independent_clients_use_the_hub_endpoint_and_the_bridge(tmp_path: Path, edge: Edge, hub: Hub) -> None:
    connector = f"{hub.url}/v1/hub/connectors/everything/mcp"
    call_echo = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=from the inspector"]
    done = inspector(tmp_path, connector, hub.key("team"), *call_echo)
    assert done.returncode == 0, done.stderr
    assert "from the inspector" in done.stdout and json.loads(done.stdout).get("isError") is not True, done.stdout
    assert inspector(tmp_path, connector, "ask_wrong", "--method", "tools/list").returncode != 0
    with httpx2.Client(base_url=edge.served.url, timeout=60) as http:
        env = http.post("/v1/tools/bridge_env", json={"input": {}}).json()
    secret = json.loads(env["result"]["content"][0]["text"])["secret"]
    bridge = f"{edge.served.url}/v1/account/team/mcp"
    bridged = inspector(tmp_path, bridge, secret, "--method", "tools/call", "--tool-name", "whoami")
    assert bridged.returncode == 0, bridged.stderr
    assert HUB_SUBJECT in bridged.stdout and json.loads(bridged.stdout).get("isError") is not True, bridged.stdout
    assert inspector(tmp_path, bridge, "wrong", "--method", "tools/list").returncode != 0


# -- a hub restart mid-session ---------------------------------------------------------------------------------


async def test_hub_restart_mid_session_fails_cleanly_then_reconnects(edge: Edge, hub: Hub) -> None:
    first = await run_turn(edge.served.url, 'call echo {"message": "one"}')
    assert first["type"] == "turn.completed", first
    session = {"sessionId": first["sessionId"], "continuationToken": first["continuationToken"]}
    hub.served.stop()
    # While the hub is down: the direct call and the session's next turn fail at once, with typed errors.
    async with httpx2.AsyncClient(base_url=edge.served.url, timeout=60) as http:
        with anyio.fail_after(60):
            down = await http.post("/v1/tools/echo", json={"input": {"message": "two"}})
    if down.status_code == 200:  # the session-less toolset was still fresh: the call itself fails
        assert down.json()["isError"] is True
        assert down.json()["result"]["error"] == "connection_unavailable", down.text
        assert "connection 'linked': connector 'everything': " in down.json()["result"]["message"]
    else:  # the toolset was listed again: the listing fails, closed, naming the connection and its cause
        assert down.status_code == 503, down.text
        assert down.json()["error"] == "connection_unavailable" and down.json()["connection"] == "linked", down.text
        [problem] = down.json()["connectionErrors"]
        assert problem["code"] == "connection_unavailable" and problem["connection"] == "linked"
        assert f"cannot reach the account hub {hub.url}" in problem["message"]
    failed = await run_turn(edge.served.url, 'call echo {"message": "two"}', session)
    assert failed["type"] == "turn.failed" and failed["data"]["error"] == "turn_build_failed"
    assert {p["code"] for p in failed["data"]["problems"]} == {"connection_unavailable"}
    hub.restart()
    # The same session goes on once the hub is back: a new connection, no new login, no restart of the edge.
    after = await run_turn(edge.served.url, 'call echo {"message": "three"}', session)
    assert after["type"] == "turn.completed", after
    assert "three" in json.dumps(after["data"])
    again = await direct_call(edge.served.url, "echo", {"message": "four"})
    assert again["isError"] is False and "four" in text_of(again)
    assert HUB_KEYS_RE.search(edge.served.log_text()) is None
