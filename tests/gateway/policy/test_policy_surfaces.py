"""Three principals, one Cedar policy, a different slice each, on every surface of a real `agent-sdk serve`
in front of server-everything: `/v1/mcp/tools` (the `mcp` 2.x client at both generations, the TypeScript
SDK client), `/v1/mcp`'s `call_tool`, `GET`/`POST /v1/tools`, resources, prompts, completion,
subscriptions (both generations), tasks, session turns and the console's actions.

Alice may do everything; Bob may call the upstream's tools and read its offerings but one resource and
one prompt (and may not cancel a task); Carol may call the authored tools only. A hidden tool is answered
exactly as a tool that does not exist; a hidden resource or prompt as one no connection offers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.peers import node20, node_module

from ..conftest import HERE, Served, Upstream, assert_clean, make_project, serve

ALICE, BOB, CAROL = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef", "carol-token-0123456789abcdef"
DAVE = "dave-operator-token-0123456789"
AUTHORED = {"lookup", "bump", "explode"}
ARCH = "demo://resource/static/document/architecture.md"
RESEARCH = "simulate-research-query"
TS_POLICY_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_policy_client.mjs"
MODES = ["auto", "legacy"]


def pid(token: str) -> str:
    """The principal id the auth chain gives a bearer token (docs/policy.md): `bearer:` + 12 hex of its SHA-256."""
    return "bearer:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def policy() -> str:
    a, b, c, d = (f'AgentSdk::Principal::"{pid(t)}"' for t in (ALICE, BOB, CAROL, DAVE))
    act = 'AgentSdk::Action::"{}"'.format
    bobs = ", ".join(
        act(m)
        for m in (
            "tools/list", "resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
            "prompts/list", "prompts/get", "completion/complete", "tasks/get", "tasks/result", "tasks/cancel",
        )
    )  # fmt: skip
    return f"""\
@id("alice-all")
permit(principal == {a}, action, resource);

@id("bob-offerings")
permit(principal == {b}, action in [{bobs}], resource);
@id("bob-upstream-tools")
permit(principal == {b}, action == {act("tools/call")}, resource is AgentSdk::Tool)
when {{ resource.connection == "ev" }};
forbid(principal == {b}, action, resource == AgentSdk::Resource::"{ARCH}");
forbid(principal == {b}, action, resource == AgentSdk::Prompt::"args-prompt");
forbid(principal == {b}, action == {act("tasks/cancel")}, resource);

@id("carol-authored")
permit(principal == {c}, action in [{act("tools/list")}, {act("session/turn")}, {act("session/read")}], resource);
permit(principal == {c}, action == {act("tools/call")}, resource is AgentSdk::Tool) when {{ resource.authored }};

@id("dave-login-only")
permit(principal == {d}, action == {act("console/login")}, resource);
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("policy")
    definition = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, advertise_resources=True,"
        " advertise_prompts=True)\n"
    )
    project = make_project(root / "project", {"ev": definition})
    (project / "agent" / "policies.cedar").write_text(policy())
    tokens = ["--bearer-token", ALICE, "--bearer-token", BOB, "--bearer-token", CAROL, "--operator-token", DAVE]
    server = serve(project, root / "state", *tokens)
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, BOB, CAROL, DAVE])


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _with_client(served: Served, token: str, mode: str, path: str = "/v1/mcp/tools") -> Any:
    http = httpx2.AsyncClient(timeout=30, headers=_auth(token))
    return http, Client(streamable_http_client(f"{served.url}{path}", http_client=http), mode=mode, cache=None)  # pyright: ignore[reportArgumentType]


async def _refusal(client: Client, name: str) -> tuple[int, str, Any]:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(name, {})
    return caught.value.code, caught.value.message, caught.value.data


def _same_as_unknown(hidden: tuple[int, str, Any], unknown: tuple[int, str, Any], name: str, missing: str) -> None:
    """A hidden tool's refusal is an unknown tool's, word for word (its name in place of the other's)."""
    assert json.loads(json.dumps(hidden).replace(name, missing)) == json.loads(json.dumps(unknown)), (hidden, unknown)


def _upstream_tools(served: Served) -> set[str]:
    with served.client(_auth(ALICE)) as http:
        names = {t["name"] for t in http.get("/v1/tools").json()["tools"]}
    assert AUTHORED < names and RESEARCH in names and "echo" in names
    return names - AUTHORED


@pytest.mark.parametrize("mode", MODES)
def test_each_principal_lists_and_calls_its_slice_on_v1_mcp_tools(served: Served, mode: str) -> None:
    upstream = _upstream_tools(served)

    async def run() -> None:
        for token, slice_, allowed, hidden in (
            (ALICE, AUTHORED | upstream, ("echo", {"message": "a"}), None),
            (BOB, upstream, ("echo", {"message": "b"}), "lookup"),
            (CAROL, AUTHORED, ("lookup", {"key": "c"}), "echo"),
        ):
            http, client = await _with_client(served, token, mode)
            async with http, client:
                assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
                assert {t.name for t in (await client.list_tools()).tools} == slice_
                assert not (await client.call_tool(*allowed)).is_error
                if hidden is not None:
                    missing = "no-such-tool-xyz"[: len(hidden)]
                    _same_as_unknown(await _refusal(client, hidden), await _refusal(client, missing), hidden, missing)

    _run(run, 120)


def test_the_typescript_client_sees_the_same_slices(served: Served) -> None:
    upstream = _upstream_tools(served)
    for token, slice_, hidden in ((BOB, upstream, "lookup"), (CAROL, AUTHORED, "echo")):
        missing = "nosuchtool"[: len(hidden)]
        env = {
            **os.environ,
            "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
            "MCP_HEADERS": json.dumps(_auth(token)),
            "MCP_CALLS": json.dumps([[hidden, {}], [missing, {}]]),
        }
        done = subprocess.run(
            [node20(), str(TS_POLICY_CLIENT), f"{served.url}/v1/mcp/tools"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["protocolVersion"] == "2025-11-25"
        assert set(out["tools"]) == slice_
        hidden_call, missing_call = out["calls"]
        assert "error" in hidden_call, hidden_call
        assert hidden_call["error"]["message"].replace(hidden, missing) == missing_call["error"]["message"]
        assert hidden_call["error"]["code"] == missing_call["error"]["code"] == -32602


def test_the_rest_catalog_and_direct_calls_hide_what_the_policy_hides(served: Served) -> None:
    upstream = _upstream_tools(served)
    with served.client(_auth(CAROL)) as http:
        assert {t["name"] for t in http.get("/v1/tools").json()["tools"]} == AUTHORED
        ok = http.post("/v1/tools/lookup", json={"input": {"key": "x"}})
        assert ok.status_code == 200 and ok.json()["result"]["value"] == "X"
        hidden, unknown = (
            http.post("/v1/tools/echo", json={"input": {}}),
            http.post("/v1/tools/ecko", json={"input": {}}),
        )
        assert hidden.status_code == unknown.status_code == 404
        assert _body(hidden, "echo", "ecko") == _body(unknown)
        described, absent = http.get("/v1/tools/echo"), http.get("/v1/tools/ecko")
        assert described.status_code == absent.status_code == 404
        assert _body(described, "echo", "ecko") == _body(absent)
    with served.client(_auth(BOB)) as http:
        assert {t["name"] for t in http.get("/v1/tools").json()["tools"]} == upstream


def _body(answer: httpx2.Response, name: str = "", instead: str = "") -> dict[str, Any]:
    """A JSON error body without its request id, `name` read as `instead`."""
    body = json.loads(answer.text.replace(name, instead) if name else answer.text)
    body.pop("requestId", None)
    return body


@pytest.mark.parametrize("mode", MODES)
def test_call_tool_on_v1_mcp_answers_a_hidden_tool_as_an_unknown_one(served: Served, mode: str) -> None:
    async def run() -> None:
        http, client = await _with_client(served, CAROL, mode, "/v1/mcp")
        async with http, client:
            envelopes = []
            for name in ("echo", "ecko", "lookup"):
                called = await client.call_tool("call_tool", {"name": name, "input": {"key": "k"}})
                envelopes.append(json.loads(called.content[0].text))  # pyright: ignore[reportAttributeAccessIssue]
            hidden, unknown, allowed = envelopes
            assert hidden["error"] == "unknown_tool" and json.dumps(hidden).replace("echo", "ecko") == json.dumps(
                unknown
            )
            assert allowed["ok"] and allowed["result"]["value"] == "K"

    _run(run, 60)


@pytest.mark.parametrize("mode", MODES)
def test_resources_prompts_and_completion_are_filtered_and_hidden(served: Served, mode: str) -> None:
    async def run() -> None:
        http, alice = await _with_client(served, ALICE, mode)
        async with http, alice:
            assert ARCH in {r.uri for r in (await alice.list_resources(cache_mode="bypass")).resources}
            assert "args-prompt" in {p.name for p in (await alice.list_prompts(cache_mode="bypass")).prompts}
            assert (await alice.read_resource(ARCH, cache_mode="bypass")).contents
        http, bob = await _with_client(served, BOB, mode)
        async with http, bob:
            uris = {r.uri for r in (await bob.list_resources(cache_mode="bypass")).resources}
            assert ARCH not in uris and uris, "the one hidden resource, and only it, is left out"
            assert (await bob.read_resource(next(iter(sorted(uris))), cache_mode="bypass")).contents
            prompts = {p.name for p in (await bob.list_prompts(cache_mode="bypass")).prompts}
            assert "args-prompt" not in prompts and "simple-prompt" in prompts
            for attempt, sentence in (
                (bob.read_resource(ARCH, cache_mode="bypass"), f"no advertised connection offers resource {ARCH!r}"),
                (
                    bob.get_prompt("args-prompt", {"city": "Oslo"}),
                    "no advertised connection offers prompt 'args-prompt'",
                ),
                (
                    bob.complete(
                        mt.PromptReference(type="ref/prompt", name="args-prompt"), {"name": "city", "value": "O"}
                    ),
                    "no advertised connection offers prompt 'args-prompt'",
                ),
            ):
                with pytest.raises(MCPError) as caught:
                    await attempt
                assert (caught.value.code, caught.value.message) == (mt.INVALID_PARAMS, sentence)
        http, carol = await _with_client(served, CAROL, mode)
        async with http, carol:  # no listing action at all: empty listings
            assert (await carol.list_resources(cache_mode="bypass")).resources == []
            assert (await carol.list_prompts(cache_mode="bypass")).prompts == []

    _run(run, 120)


HANDSHAKE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _rpc(served: Served, token: str, method: str, params: dict[str, Any], session: str | None = None) -> Any:
    headers = {**HANDSHAKE, **_auth(token), **({"Mcp-Session-Id": session} if session else {})}
    with served.client(headers) as http:
        return http.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def test_a_hidden_resource_is_not_subscribed_at_either_generation(served: Served) -> None:
    session = _rpc(served, BOB, "initialize", INITIALIZE).headers["mcp-session-id"]
    refused = _rpc(served, BOB, "resources/subscribe", {"uri": ARCH}, session).json()
    assert refused["error"] == {"code": -32602, "message": f"no advertised connection offers resource {ARCH!r}"}
    alices = _rpc(served, ALICE, "initialize", INITIALIZE).headers["mcp-session-id"]
    assert _rpc(served, ALICE, "resources/subscribe", {"uri": ARCH}, alices).json()["result"] == {}

    async def listen() -> None:
        http, bob = await _with_client(served, BOB, "auto")
        async with http, bob:
            with pytest.raises(MCPError) as caught:
                async with bob.listen(resource_subscriptions=[ARCH]):
                    pass
            assert caught.value.message == f"no advertised connection offers resource {ARCH!r}"

    _run(listen, 60)


def test_tasks_of_a_hidden_tool_and_a_refused_task_method(served: Served) -> None:
    task = {"name": RESEARCH, "arguments": {"topic": "policy"}, "task": {}}
    hidden = _rpc(served, CAROL, "tools/call", task).json()
    unknown = _rpc(served, CAROL, "tools/call", {**task, "name": "simulate-research-querx"}).json()
    assert hidden["error"]["code"] == -32602
    assert json.dumps(hidden).replace(RESEARCH, "simulate-research-querx") == json.dumps(unknown)
    created = _rpc(served, BOB, "tools/call", task).json()
    task_id = created["result"]["task"]["taskId"]
    assert _rpc(served, BOB, "tasks/get", {"taskId": task_id}).json()["result"]["taskId"] == task_id
    cancelled = _rpc(served, BOB, "tasks/cancel", {"taskId": task_id}).json()
    forged = _rpc(served, BOB, "tasks/cancel", {"taskId": task_id[:-6] + "AAAAAA"}).json()
    assert cancelled["error"] == forged["error"] and cancelled["error"]["code"] == -32602
    assert _rpc(served, BOB, "tasks/get", {"taskId": task_id}).json()["result"]["status"] != "cancelled"


def test_a_turns_toolset_is_its_principals_and_turn_started_says_so(served: Served) -> None:
    with served.client(_auth(CAROL)) as http:
        created = http.post("/v1/session", json={"message": "hello"})
        assert created.status_code == 200, created.text
        session = created.json()["sessionId"]
        started = _event(http, session, "turn.started")
        hidden = len(_upstream_tools(served))
        assert started["data"]["policy"] == {"tools": len(AUTHORED), "toolsHidden": hidden}
    with served.client(_auth(BOB)) as http:  # Bob has no session/turn
        refused = http.post("/v1/session", json={"message": "hello"})
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
        assert "session/turn" in refused.json()["message"]


def test_the_consoles_actions_are_decided(served: Served) -> None:
    with served.client(_auth(DAVE)) as http:  # an operator whom the policy lets log in, not restart
        refused = http.post("/v1/connections/ev/restart")
        assert refused.status_code == 403 and "console/restart on 'ev'" in refused.json()["message"]
        login = http.post("/v1/connections/ev/login")  # permitted: on to the connection's own check
        assert login.status_code == 400 and "oauth=True" in login.json()["message"]


def test_a_changed_policy_file_is_reloaded_and_a_broken_one_is_not(served: Served, tmp_path: Path) -> None:
    path = Path(served.log.parent) / "project" / "agent" / "policies.cedar"
    original = path.read_text()
    carol = f'AgentSdk::Principal::"{pid(CAROL)}"'
    try:
        path.write_text(original + f'permit(principal == {carol}, action, resource == AgentSdk::Tool::"echo");\n')
        _await_log(served, "policy reloaded", 1)
        with served.client(_auth(CAROL)) as http:
            assert {t["name"] for t in http.get("/v1/tools").json()["tools"]} == AUTHORED | {"echo"}
        path.write_text(original + "permit(principal, action, resource) when { principal.nope };\n")
        _await_log(served, "policy reload failed, the previous policy stays in force", 1)
        with served.client(_auth(CAROL)) as http:
            assert {t["name"] for t in http.get("/v1/tools").json()["tools"]} == AUTHORED | {"echo"}
        assert "policies.cedar:" in served.log_text().split("policy reload failed")[1].splitlines()[0]
    finally:
        path.write_text(original)
        _await_log(served, "policy reloaded", 2)


def _event(http: httpx2.Client, session: str, kind: str) -> dict[str, Any]:
    """The session's first event of `kind`, once it is on the event log (NDJSON)."""
    found: list[dict[str, Any]] = []

    async def wait() -> None:
        while not found:
            lines = http.get(f"/v1/session/{session}/events").text.splitlines()
            found.extend(e for e in map(json.loads, lines) if e["type"] == kind)
            await anyio.sleep(0.05)

    _run(wait, 20)
    return found[0]


def _run(work: Callable[[], Awaitable[None]], within: float) -> None:
    async def bounded() -> None:
        with anyio.fail_after(within):
            await work()

    anyio.run(bounded)


def _await_log(served: Served, text: str, count: int) -> None:
    """Wait for the `count`-th log line holding `text` (the watcher checks the file every second)."""

    async def wait() -> None:
        with anyio.fail_after(20):
            while served.log_text().count(text) < count:  # noqa: ASYNC110
                await anyio.sleep(0.1)

    anyio.run(wait)


@pytest.mark.parametrize("mode", MODES)
def test_serve_stdio_decides_for_its_one_caller(tmp_path: Path, everything: Upstream, mode: str) -> None:
    definition = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True)\n"
    )
    project = make_project(tmp_path / "project", {"ev": definition})
    (project / "agent" / "policies.cedar").write_text(
        'permit(principal == AgentSdk::Principal::"stdio", action == AgentSdk::Action::"tools/list", resource);\n'
        'permit(principal == AgentSdk::Principal::"stdio", action == AgentSdk::Action::"tools/call", resource)\n'
        "when { resource.authored };\n"
    )
    argv = ["-m", "gateway", "serve", "--stdio", "--dir", str(project), "--state-root", str(tmp_path / "state")]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(HERE.parent.parent)}
    params = StdioServerParameters(command=sys.executable, args=argv, env=env)

    async def run() -> None:
        async with Client(stdio_client(params), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
            assert {t.name for t in (await client.list_tools()).tools} == AUTHORED
            assert not (await client.call_tool("lookup", {"key": "s"})).is_error
            _same_as_unknown(await _refusal(client, "echo"), await _refusal(client, "ecko"), "echo", "ecko")

    _run(run, 90)


def _audit_records(served: Served, principal: str, target: str, within: float = 30) -> list[dict[str, Any]]:
    """The audit records of `principal`'s calls of `target`, once the trail's writer has written one."""
    path = served.state_root / "audit" / "audit.jsonl"
    deadline = time.monotonic() + within
    while True:
        lines = path.read_text().splitlines() if path.exists() else []
        found = [r for r in map(json.loads, lines) if r["principal"] == principal and r["target"] == target]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("mode", MODES)
def test_the_audit_trail_names_the_policy_that_decided_each_call(served: Served, mode: str) -> None:
    # One record per decision: an allowed call names the permit that let it through; a hidden tool's call
    # (answered as an unknown tool) is a refusal naming no permit (the default deny), reason `policy_denied`.
    async def run() -> None:
        http, client = await _with_client(served, CAROL, mode)
        async with http, client:
            assert not (await client.call_tool("lookup", {"key": f"audit-{mode}"})).is_error
            await _refusal(client, "echo")

    anyio.run(run)
    allowed = _audit_records(served, pid(CAROL), "lookup")
    assert allowed and allowed[-1]["decision"] == "allow" and allowed[-1]["outcome"] == "ok", allowed
    [permit] = allowed[-1]["policies"]  # Carol's permit for authored tools has no @id: its file and line
    assert permit.startswith("policies.cedar:"), allowed
    refused = _audit_records(served, pid(CAROL), "echo")
    assert refused, "a call the policy refused left no audit record"
    assert {(r["decision"], r["outcome"], r["reason"], r["connection"]) for r in refused} == {
        ("deny", "refused", "policy_denied", "ev")
    }
    assert all(r["policies"] == [] for r in refused), refused  # no permit: Cedar's default deny
