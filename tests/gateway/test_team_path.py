"""The team path of docs/team.md ("Running it for a team") end to end, against real components only.

oidc-provider is the company IdP (people in groups; `carol` is in `gateway-admins`); `docs` is the
audience-checking MCP server behind that IdP, a `grants="per_principal"` connection whose `echo` (our
`delete_doc`) needs an operator's approval; server-everything is a shared connection. Two `agent-sdk serve`
replicas share Redis and one deployment key behind `deploy/nginx.conf`, with `--oauth-issuer`,
`--operator-claim groups=gateway-admins` and `--public-url` the nginx front. Then:

- each person signs in to `/v1/mcp/tools` with a real peer (the `mcp` Python SDK client, the TypeScript
  SDK client, mcp-remote), is shown the sign-in link for `docs` by that peer, opens it in chromium, passes
  the IdP and lands on "Signed in to docs"; their next call runs as them;
- a link forwarded to someone else is refused with a sentence that says what to do;
- carol signs in to the console and approves alice's held `echo`, whose arguments and person it shows;
- `pin --principal` (alice's) writes `mcp.lock` from the replicas' Redis and `pin --check` is green;
- no token seen on the way is in either replica's log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from playwright.sync_api import Page, expect

from tests.browser import signed_in
from tests.conftest import free_port
from tests.oauth.peers import ResourceServer, oidc_provider, resource_server
from tests.peers import node20, node22, node_bin, node_module

from .conftest import Served, Upstream, assert_clean, make_project, serve
from .oauth_peers import person_token
from .per_user import TS_SIGN_IN, call_body, sign_in_url_in, text_of
from .replicas import STATE_KEY, RedisServer, nginx_front, redis_server

pytestmark = [pytest.mark.peers, pytest.mark.timeout(300)]

GROUPS = {
    "alice": ["engineering"],
    "bob": ["engineering"],
    "erin": ["engineering"],
    "dave": ["support"],
    "carol": ["gateway-admins"],
}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "team.md"
CLAIM = "groups=gateway-admins"
SIGNED_IN = "Signed in to docs; go back to your agent."
SEEN: list[str] = []
"""Every token and cookie the test saw on the path: none may be in a replica's log."""


@dataclass
class Team:
    idp: str
    front: str
    redis: RedisServer
    project: Path
    replicas: list[Served] = field(default_factory=list)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("team")
    with (
        oidc_provider(3600, groups=GROUPS) as idp,
        resource_server(idp.issuer) as docs,
        redis_server(root / "redis") as redis,
    ):
        project = _project(root / "project", docs, everything)
        ports = [free_port(), free_port()]
        with nginx_front(root / "nginx", ports) as front:
            env = {"AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_STATE_KEY": STATE_KEY}
            flags = ("--oauth-issuer", idp.issuer, "--operator-claim", CLAIM, "--public-url", front)
            found = Team(idp.issuer, front, redis, project)
            try:
                for port in ports:
                    found.replicas.append(serve(project, root / f"state-{port}", *flags, env=env, port=port))
                yield found
            finally:
                for served in found.replicas:
                    served.stop()
            for served in found.replicas:
                assert_clean(served.log_text(), SEEN)


def _project(root: Path, docs: ResourceServer, everything: Upstream) -> Path:
    head = "from connections import define_connection\n\n"
    project = make_project(
        root,
        {
            "docs": f"{head}connection = define_connection(url={docs.url!r}, oauth=True, grants='per_principal', "
            "advertise_tools=True, require_approval=['echo'])\n",
            "everything": f"{head}connection = define_connection(url={everything.url!r}, advertise_tools=True, "
            "deny_tools=['echo'])\n",
        },
        tools=False,
    )
    (project / "agent" / "policies.cedar").write_text(_policy_in_the_docs())
    return project


def _policy_in_the_docs() -> str:
    """The Cedar policy by group docs/team.md gives, as an operator copies it."""
    found = re.search(r"```cedar\n(.*?)```", DOCS.read_text(), re.S)
    assert found is not None, "docs/team.md lost its policy"
    return found[1]


def _token(team: Team, person: str) -> str:
    """`person`'s MCP token for the gateway behind nginx (what their peer's own sign-in gets)."""
    token = person_token(team.idp, f"{team.front}/v1/mcp/tools", person)
    SEEN.append(token)
    return token


def _principal(team: Team, person: str) -> str:
    return "oauth:" + hashlib.sha256(f"{team.idp}\n{person}".encode()).hexdigest()[:16]


@contextmanager
def _opened(profile: Path, url: str, idp: str, person: str) -> Iterator[Page]:
    """`tests.browser.signed_in`, its session cookie kept for the scan of the logs."""
    with signed_in(profile, url, idp, person) as page:
        SEEN.extend(c.get("value", "") for c in page.context.cookies() if c.get("name") == "agent-sdk-session")
        yield page


def _signs_in(team: Team, profile: Path, link: str, person: str) -> None:
    assert link.startswith(f"{team.front}/v1/oauth/sign-in?ticket="), link
    SEEN.append(parse_qs(urlsplit(link).query)["ticket"][0])
    with _opened(profile, link, team.idp, person) as page:
        expect(page.locator("#login-result")).to_have_text(SIGNED_IN, timeout=30_000)


def _call(team: Team, token: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = call_body(tool)
    body["params"]["arguments"] = arguments
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": tool,
        "authorization": f"Bearer {token}",
    }
    with httpx2.Client(timeout=120.0) as http:
        answer = http.post(f"{team.front}/v1/mcp/tools", json=body, headers=headers)
    assert answer.status_code == 200 and "result" in answer.json(), answer.text
    return answer.json()["result"]


async def _python_listing(team: Team, token: str) -> tuple[list[str], dict[str, Any]]:
    """`tools/list` with the `mcp` SDK's own client: the names and the result's `_meta`."""
    async with httpx2.AsyncClient(timeout=60, headers={"authorization": f"Bearer {token}"}) as http:
        with anyio.fail_after(60):
            transport = streamable_http_client(f"{team.front}/v1/mcp/tools", http_client=http)
            async with Client(transport, mode="legacy", cache=None) as client:
                listed = await client.list_tools()
    return sorted(t.name for t in listed.tools), dict(listed.meta or {})


def test_a_person_on_the_python_sdk_signs_in_through_the_link_in_the_listing(team: Team, tmp_path: Path) -> None:
    token = _token(team, "alice")
    names, meta = anyio.run(_python_listing, team, token)
    assert "get-sum" in names and "whoami" not in names  # the listing survives docs
    [way_in] = meta["agent-sdk/signIn"]
    assert way_in["connection"] == "docs"
    _signs_in(team, tmp_path / "alice", way_in["url"], "alice")
    names, meta = anyio.run(_python_listing, team, token)
    assert "whoami" in names and "agent-sdk/signIn" not in meta
    assert text_of(_call(team, token, "whoami", {})) == "alice"


def test_a_person_on_the_typescript_sdk_signs_in_through_the_link_its_call_was_refused_with(
    team: Team, tmp_path: Path
) -> None:
    token = _token(team, "bob")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
        "MCP_HEADERS": json.dumps({"authorization": f"Bearer {token}"}),
    }
    command = [str(node20()), str(TS_SIGN_IN), f"{team.front}/v1/mcp/tools", "whoami", "legacy"]
    reports: list[dict[str, Any]] = []
    with subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as peer:
        assert peer.stdout is not None and peer.stdin is not None
        for line in peer.stdout:
            reports.append(json.loads(line))
            if "asked" in reports[-1]:
                _signs_in(team, tmp_path / "bob", reports[-1]["url"], "bob")
                peer.stdin.write("signed in\n")
                peer.stdin.flush()
        assert peer.wait(timeout=60) == 0, reports
    assert reports[0]["code"] == -32042  # URL elicitation required: the link, for the person to open
    assert reports[-1]["result"]["content"][0]["text"] == "bob"


def test_a_person_on_mcp_remote_signs_in_twice_in_chromium_the_gateway_then_docs(team: Team, tmp_path: Path) -> None:
    read, write = os.pipe()
    stderr, errlog = os.fdopen(read, "r"), os.fdopen(write, "w")
    lines: list[str] = []
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{node22().parent}:/usr/bin:/bin", "HOME": str(home), "BROWSER": "true"}
    server = StdioServerParameters(command=str(node_bin("mcp-remote")), args=[f"{team.front}/v1/mcp/tools"], env=env)

    def gateway_login() -> None:  # mcp-remote prints the IdP's URL where it would open a browser
        for line in stderr:
            lines.append(line)
            if line.startswith("http") and "/auth?" in line:
                url = line.strip()
                assert parse_qs(urlsplit(url).query)["resource"] == [f"{team.front}/v1/mcp/tools"]
                with _opened(tmp_path / "dave-gateway", url, team.idp, "dave"):
                    pass  # chromium delivered the code to mcp-remote's own callback
                break
        for line in stderr:  # keep draining: a full pipe would stall mcp-remote
            lines.append(line)

    async def calls() -> tuple[str, str, list[str]]:
        first = second = ""
        names: list[str] = []
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(anyio.to_thread.run_sync, gateway_login)
            with anyio.fail_after(150):
                async with Client(stdio_client(server, errlog=errlog), mode="legacy") as client:
                    first = await _text_or_error(client)
                    link = sign_in_url_in(first)
                    await anyio.to_thread.run_sync(_signs_in, team, tmp_path / "dave", link, "dave")
                    second = await _text_or_error(client)
                    names = sorted(t.name for t in (await client.list_tools()).tools)
            errlog.close()
        return first, second, names

    first, second, names = anyio.run(calls)
    assert "sign in" in first.lower(), first
    assert second == "dave", "".join(lines)[-3000:]
    assert names == ["echo", "whoami"]  # the policy by group: support calls the tools of docs only


async def _text_or_error(client: Client) -> str:
    try:
        result = await client.call_tool("whoami", {})
    except MCPError as exc:  # -32042 when the peer takes URL elicitations: the link is in the error
        return f"{exc} {json.dumps(exc.data)}"
    block = result.content[0]
    assert block.type == "text"
    return block.text


def test_a_forwarded_sign_in_link_is_refused_with_a_sentence_that_names_the_fix(team: Team, tmp_path: Path) -> None:
    token = _token(team, "erin")
    link = sign_in_url_in(text_of(_call(team, token, "whoami", {})))
    with _opened(tmp_path / "frank", link, team.idp, "frank") as page:
        refusal = page.locator("#login-result")
        expect(refusal).to_contain_text("issued to someone else", timeout=30_000)
        expect(refusal).to_contain_text("Call the tool again from your own agent")


def test_the_console_under_oauth_approves_a_held_call_showing_its_arguments_and_person(
    team: Team, tmp_path: Path
) -> None:
    token = _token(team, "alice")  # alice signed in to docs in the first test
    answers: list[dict[str, Any]] = []
    held = threading.Thread(
        target=lambda: answers.append(_call(team, token, "echo", {"text": "delete doc 42"})), daemon=True
    )
    held.start()
    with _opened(tmp_path / "carol", f"{team.front}/", team.idp, "carol") as page:
        expect(page.locator("#who")).to_have_text("you: oauth (operator)", timeout=30_000)
        row = page.locator("#approvals tr[data-tool='echo']")
        expect(row).to_be_visible(timeout=60_000)
        expect(row).to_contain_text("docs")
        expect(row.locator("td.arguments")).to_contain_text("delete doc 42")
        expect(row.locator("td.person")).to_contain_text("alice")
        row.get_by_role("button", name="Approve").click()
        held.join(timeout=60)
    assert answers and answers[0].get("isError") is not True, answers
    assert "delete doc 42" in text_of(answers[0])


def test_pin_check_is_green_with_the_per_person_connection(team: Team) -> None:
    alice = _principal(team, "alice")  # signed in to docs in the first test
    local = _pin(team, "--yes", "--principal", alice, state_url=False)  # her grant is in Redis, not the files
    assert local.returncode == 1
    assert "set AGENT_SDK_STATE_URL (and the deployment's state key)" in local.stderr, local.stderr
    written = _pin(team, "--yes", "--principal", alice)
    assert written.returncode == 0, written.stderr
    lock = json.loads((team.project / "mcp.lock").read_text())
    assert sorted(lock["connections"]["docs"]["tools"]) == ["echo", "whoami"]
    checked = _pin(team, "--check", "--principal", alice)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 drift(s) in 2 connection(s)" in checked.stderr
    assert not any(token in written.stdout + written.stderr + checked.stdout for token in SEEN)


def _pin(team: Team, *args: str, state_url: bool = True) -> subprocess.CompletedProcess[str]:
    """`agent-sdk pin` where a replica's state is, with the replicas' Redis and deployment key (docs/team.md)."""
    where = ["--dir", str(team.project), "--state-root", str(team.replicas[0].state_root)]
    command = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "pin", *where, *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    if state_url:
        env.update({"AGENT_SDK_STATE_URL": team.redis.url, "AGENT_SDK_STATE_KEY": STATE_KEY})
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)


def test_the_operators_cli_signs_in_with_the_idp_and_approves_a_held_call(team: Team, tmp_path: Path) -> None:
    config = tmp_path / "config"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    env["AGENT_SDK_CONFIG_DIR"] = str(config)
    cli = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()"]
    login = [*cli, "login", "--gateway", team.front, "--no-browser"]
    with subprocess.Popen(login, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        url = next((line.strip() for line in proc.stderr if "/auth?" in line), None)
        assert url is not None, "agent-sdk login printed no URL"
        with _opened(tmp_path / "carol", url, team.idp, "carol"):
            pass  # chromium delivered the code to the CLI's loopback listener
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"signed in to {team.front}" in out

    token = _token(team, "bob")  # bob signed in to docs through the TypeScript SDK
    answers: list[dict[str, Any]] = []
    held = threading.Thread(
        target=lambda: answers.append(_call(team, token, "echo", {"text": "delete doc 7"})), daemon=True
    )
    held.start()
    listed: dict[str, Any] = {}
    with httpx2.Client(timeout=10.0) as http:  # the held call, as the replicas see it (any of them, through Redis)
        for _ in range(200):
            waiting = http.get(f"{team.front}/v1/approvals", headers={"authorization": f"Bearer {_carol_token(team)}"})
            assert waiting.status_code == 200, waiting.text
            if waiting.json()["approvals"]:
                listed = waiting.json()["approvals"][0]
                break
            held.join(timeout=0.05)
    assert listed.get("arguments") == {"text": "delete doc 7"}, listed
    shown = subprocess.run([*cli, "approvals", "list", "--url", team.front], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert listed["id"] in shown.stdout and "delete doc 7" in shown.stdout and "bob" in shown.stdout, shown.stdout
    approve = [*cli, "approvals", "approve", listed["id"], "--url", team.front]
    approved = subprocess.run(approve, env=env, capture_output=True, text=True)
    assert approved.returncode == 0, approved.stderr
    held.join(timeout=60)
    assert answers and "delete doc 7" in text_of(answers[0]), answers
    for output in (out, err, shown.stdout, shown.stderr, approved.stdout, approved.stderr):
        assert not any(seen in output for seen in SEEN)


def _carol_token(team: Team) -> str:
    if not _CAROL:
        _CAROL.append(person_token(team.idp, team.front, "carol"))  # an operator's token for the gateway itself
        SEEN.append(_CAROL[0])
    return _CAROL[0]


_CAROL: list[str] = []


def test_a_token_for_another_resource_is_refused_with_the_fix(team: Team) -> None:
    token = _token(team, "alice")  # for /v1/mcp/tools, not for the operator routes
    with httpx2.Client(timeout=30.0) as http:
        refused = http.get(f"{team.front}/v1/approvals", headers={"authorization": f"Bearer {token}"})
    assert refused.status_code == 401
    assert "is for another resource" in refused.text and "sign in again for this one" in refused.text, refused.text
    assert "resource_metadata=" in refused.headers["www-authenticate"]
