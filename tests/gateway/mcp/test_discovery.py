"""Discovery mode (`serve --discovery`, docs/discovery.md) on a real `agent-sdk serve` in front of three reference
servers: server-everything (HTTP), server-filesystem and mcp-server-git (stdio), with a Cedar policy that lets
Alice see everything and Bob only server-everything's tools. Peers: the `mcp` 2.x client at both generations and
the TypeScript SDK client.

`tools/list` is the three meta-tools; a search is ranked over what the caller may see, so Bob's answers, errors and
counts never name a filesystem or git tool; `call_tool` runs the real tool through the one executor and a hidden
name answers word for word as an unknown one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError

from tests.peers import node20, node_bin, node_module, py_peer

from ..conftest import HERE, Served, Upstream, assert_clean, make_project, serve
from ..policy.test_policy_surfaces import pid
from .test_subscriptions import counting_stdio

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
OPERATOR = "dave-operator-token-0123456789"
SEARCH_ORDER = ["search_tools", "describe_tool", "call_tool"]
META = set(SEARCH_ORDER)
SHARED: list[str] = []  # the filesystem server's folder
TS_POLICY_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_policy_client.mjs"


def _policy() -> str:
    a, b = (f'AgentSdk::Principal::"{pid(t)}"' for t in (ALICE, BOB))
    return f"""\
@id("alice-all")
permit(principal == {a}, action, resource);
@id("bob-list")
permit(principal == {b}, action == AgentSdk::Action::"tools/list", resource);
@id("bob-everything-tools")
permit(principal == {b}, action == AgentSdk::Action::"tools/call", resource is AgentSdk::Tool)
when {{ resource.connection == "ev" }};
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("discovery")
    shared = root / "files"
    shared.mkdir()
    (shared / "notes.txt").write_text("discovery works\n")
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    head = "from connections import define_connection\n\n"
    project = make_project(
        root / "project",
        {
            "ev": f"{head}connection = define_connection(url={everything.url!r}, advertise_tools=True)\n",
            "fs": f"{head}connection = define_connection(command={str(node_bin('mcp-server-filesystem'))!r},"
            f" args=[{str(shared)!r}], advertise_tools=True, require_approval=['write_file'])\n",
            "counting": counting_stdio("auto", ["add_tool", "invoice_lookup_late"]),
            "git": f"{head}connection = define_connection(command={str(py_peer('mcp-server-git'))!r},"
            f" args=['--repository', {str(repo)!r}], advertise_tools=True)\n",
        },
    )
    (project / "agent" / "policies.cedar").write_text(_policy())
    tokens = ("--bearer-token", ALICE, "--bearer-token", BOB, "--operator-token", OPERATOR)
    server = serve(project, root / "state", *tokens, "--discovery")
    SHARED.append(str(shared))
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, BOB, OPERATOR])


def _run(work: Callable[[], Awaitable[None]], within: float) -> None:
    async def bounded() -> None:
        with anyio.fail_after(within):
            await work()

    anyio.run(bounded)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _all_tools(served: Served, token: str) -> set[str]:
    """What `GET /v1/tools` (the whole list, discovery or not) gives `token`: docs/discovery.md's way to it."""
    with served.client(_auth(token)) as http:
        return {t["name"] for t in http.get("/v1/tools").json()["tools"]}


def _client(served: Served, token: str, mode: str) -> tuple[httpx2.AsyncClient, Client]:
    http = httpx2.AsyncClient(timeout=30, headers=_auth(token))
    url = f"{served.url}/v1/mcp/tools"
    return http, Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)


def _found(result: Any) -> list[str]:
    assert not result.is_error, result
    return [t["name"] for t in result.structured_content["tools"]]


async def _refusal(client: Client, name: str, arguments: dict[str, Any]) -> tuple[int, str, Any]:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(name, arguments)
    return caught.value.code, caught.value.message, caught.value.data


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_two_principals_search_the_same_catalog_and_see_what_the_policy_says(served: Served, mode: str) -> None:
    everything, every = _all_tools(served, BOB), _all_tools(served, ALICE)
    hidden = every - everything
    assert {"read_text_file", "list_directory", "git_status", "git_log"} <= hidden and "echo" in everything
    shared = SHARED[0]
    answers: list[str] = []

    async def run() -> None:
        for token in (ALICE, BOB):
            http, client = _client(served, token, mode)
            async with http, client:
                listed = (await client.list_tools()).tools
                assert {t.name for t in listed} == META
                if token == BOB:
                    answers.append(json.dumps([t.model_dump(mode="json") for t in listed]))
                reading = await client.call_tool("search_tools", {"query": "read the text contents of a file"})
                status = await client.call_tool("search_tools", {"query": "show the working tree status of a git repo"})
                echo = await client.call_tool("search_tools", {"query": "echo back the message I send"})
                assert "echo" in _found(echo)[:5]
                if token == ALICE:
                    assert "read_text_file" in _found(reading)[:5] and "git_status" in _found(status)[:5]
                    called = await client.call_tool("call_tool", {"name": "read_text_file", "arguments": {
                        "path": f"{shared}/notes.txt"}})  # fmt: skip
                    assert not called.is_error and "discovery works" in json.dumps(called.model_dump(mode="json"))
                    continue
                assert not set(_found(reading)) & hidden and not set(_found(status)) & hidden
                answers.extend(json.dumps(r.model_dump(mode="json")) for r in (reading, status, echo))
                # describe and call of a hidden tool: word for word an unknown one's, and a direct call's
                for name in ("read_text_file", "git_status"):
                    missing = "no_such_tool_xyz_abc"[: len(name)]
                    shown = await client.call_tool("describe_tool", {"name": name})
                    absent = await client.call_tool("describe_tool", {"name": missing})
                    assert shown.is_error and json.dumps(shown.model_dump(mode="json")).replace(name, missing) == (
                        json.dumps(absent.model_dump(mode="json"))
                    )
                    via = await _refusal(client, "call_tool", {"name": name, "arguments": {}})
                    unknown = await _refusal(client, "call_tool", {"name": missing, "arguments": {}})
                    direct = await _refusal(client, missing, {})
                    assert json.loads(json.dumps(via).replace(name, missing)) == list(unknown) == list(direct)
                echoed = await client.call_tool("call_tool", {"name": "echo", "arguments": {"message": "hi"}})
                assert not echoed.is_error and "hi" in json.dumps(echoed.model_dump(mode="json"))

    _run(run, 180)
    bobs = "\n".join(answers)  # what Bob was told unprompted: the listing and the searches (an error repeats his words)
    assert not [n for n in hidden if f'"{n}"' in bobs or f" {n}" in bobs], "a hidden tool's name reached Bob"
    assert json.loads(answers[0])[0]["description"].endswith("Servers you can reach: ev.")  # the catalog, his


def test_the_typescript_client_searches_and_calls_through_discovery(served: Served) -> None:
    hidden = _all_tools(served, ALICE) - _all_tools(served, BOB)
    calls = [
        ["search_tools", {"query": "list the files in a directory"}],
        ["call_tool", {"name": "echo", "arguments": {"message": "from ts"}}],
        ["call_tool", {"name": "list_directory", "arguments": {"path": "/"}}],
        ["call_tool", {"name": "nosuchtool_xyz", "arguments": {"path": "/"}}],
    ]
    outs = {}
    for who, token in (("alice", ALICE), ("bob", BOB)):
        env = {
            **os.environ,
            "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
            "MCP_HEADERS": json.dumps(_auth(token)),
            "MCP_CALLS": json.dumps(calls),
        }
        done = subprocess.run(
            [node20(), str(TS_POLICY_CLIENT), f"{served.url}/v1/mcp/tools"],
            env=env, capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outs[who] = json.loads(done.stdout)
        assert set(outs[who]["tools"]) == META
    alice, bob = outs["alice"]["calls"], outs["bob"]["calls"]
    assert "list_directory" in [t["name"] for t in alice[0]["result"]["structuredContent"]["tools"]]
    assert not {t["name"] for t in bob[0]["result"]["structuredContent"]["tools"]} & hidden
    assert "from ts" in json.dumps(alice[1]) and "from ts" in json.dumps(bob[1])
    assert "error" not in alice[2]
    hidden_call, unknown_call = bob[2]["error"], bob[3]["error"]
    assert hidden_call["code"] == unknown_call["code"] == -32602
    assert hidden_call["message"].replace("list_directory", "nosuchtool_xyz") == unknown_call["message"]


def test_a_call_found_by_search_that_needs_approval_is_held_and_shown_to_the_operator(served: Served) -> None:
    """`write_file` needs approval: reached through `call_tool`, it waits in `GET /v1/approvals` under its own
    name, runs once approved, and the audit trail records `write_file`, not `call_tool`."""
    target = f"{SHARED[0]}/approved.txt"
    answers: list[Any] = []

    async def call() -> None:
        http, client = _client(served, ALICE, "auto")
        async with http, client:
            found = _found(await client.call_tool("search_tools", {"query": "create a new file with this content"}))
            assert "write_file" in found
            answers.append(await client.call_tool("call_tool", {"name": "write_file", "arguments": {
                "path": target, "content": "held, then approved"}}))  # fmt: skip

    async def approve() -> None:
        async with httpx2.AsyncClient(base_url=served.url, headers=_auth(OPERATOR), timeout=30) as ops:
            while not (pending := (await ops.get("/v1/approvals")).json()["approvals"]):  # noqa: ASYNC110
                await anyio.sleep(0.05)  # the operator's console polls the same list
            assert pending[0]["tool"] == "write_file" and pending[0]["connection"] == "fs", pending
            assert not await anyio.Path(target).exists()  # held: nothing ran yet
            decided = await ops.post(f"/v1/approvals/{pending[0]['id']}", json={"decision": "approve"})
            assert decided.status_code == 200, decided.text

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            tg.start_soon(approve)

    _run(both, 60)
    assert not answers[0].is_error and Path(target).read_text() == "held, then approved"
    written: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + 15
    with served.client(_auth(OPERATOR)) as ops:  # the trail is written off the call's path (docs/audit.md)
        while not written and time.monotonic() < deadline:
            records = ops.get("/v1/audit").json()["records"]
            written = [r for r in records if r.get("target") == "write_file"]
    assert written and written[-1]["outcome"] == "ok" and written[-1]["approver"], written
    assert not [r for r in records if r.get("target") in META], [
        (r["target"], r.get("reason"), r.get("outcome")) for r in records
    ]


def test_an_upstreams_list_changed_makes_a_new_tool_findable(served: Served) -> None:
    """counting's `add_tool` adds `invoice_lookup_late` and announces `notifications/tools/list_changed`; the
    listing cache drops, and the next search (a new index) finds it."""

    async def run() -> None:
        http, client = _client(served, ALICE, "auto")
        async with http, client:
            before = _found(await client.call_tool("search_tools", {"query": "look up an invoice added late"}))
            assert "invoice_lookup_late" not in before
            async with client.listen(tools_list_changed=True) as subscription:
                adding = {"name": "add_tool", "arguments": {"name": "invoice_lookup_late"}}
                await client.call_tool("call_tool", adding)
                with anyio.fail_after(20):
                    async for event in subscription:  # the peer's own event: the upstream's change reached us
                        if isinstance(event, ToolsListChanged):
                            break
            after = _found(await client.call_tool("search_tools", {"query": "look up an invoice added late"}))
            assert after[0] == "invoice_lookup_late", after

    _run(run, 60)


def test_the_worked_example_in_docs_discovery_runs_as_written(tmp_path: Path) -> None:
    """docs/discovery.md's project, command and client, run: its connection file (with the installed filesystem
    server in place of `npx`), its `serve` flags, and its client block, whose printed lines are its comments."""
    page = (HERE.parent.parent / "docs" / "discovery.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", page, re.S)
    connection = next(b for lang, b in blocks if lang == "python" and "define_connection" in b)
    command = next(b for lang, b in blocks if lang == "sh" and "serve" in b).splitlines()[-1]
    client = next(b for lang, b in blocks if lang == "python" and "Client(" in b)
    folder = tmp_path / "files"
    folder.mkdir()
    connection = connection.replace('command="npx",', f"command={str(node_bin('mcp-server-filesystem'))!r},")
    connection = connection.replace('"-y", "@modelcontextprotocol/server-filesystem", "/tmp"', repr(str(folder)))
    project = make_project(tmp_path / "my-agent", {"files": connection}, tools=False)
    flags = command.split("--dir my-agent", 1)[1].split()
    assert flags[0] == "--discovery", command
    server = serve(project, tmp_path / "state", *flags)
    try:
        source = client.replace("http://127.0.0.1:3000", server.url).replace('"/tmp"', repr(str(folder)))
        printed: list[str] = []
        code = compile(source, "docs/discovery.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)

        def show(*values: object) -> None:
            printed.append(" ".join(map(str, values)))

        namespace: dict[str, Any] = {"print": show}

        async def run() -> None:
            await eval(code, namespace)  # the docs' own block

        _run(run, 60)
        shown = [line.strip()[2:] for line in client.splitlines() if line.strip().startswith("# [")]
        assert printed[0] == shown[0]
        assert printed[1].startswith(shown[1].removesuffix(", ...]")), printed  # the best match first
        assert not namespace["result"].is_error
    finally:
        server.stop()


def test_serve_stdio_in_discovery_mode_lists_the_meta_tools_and_calls_through_them(
    tmp_path: Path, everything: Upstream
) -> None:
    """`serve --stdio --discovery --discovery-pin get-sum`: a desktop client sees the meta-tools and the pinned
    tool, finds `echo` by searching and calls it through `call_tool`."""
    head = "from connections import define_connection\n\n"
    ev = f"{head}connection = define_connection(url={everything.url!r}, advertise_tools=True)\n"
    project = make_project(tmp_path / "my-agent", {"ev": ev}, tools=False)
    env = {**os.environ, "AGENT_SDK_STATE_ROOT": str(tmp_path / "state")}
    argv = ["serve", "--stdio", "--dir", str(project), "--discovery", "--discovery-pin", "get-sum"]
    params = StdioServerParameters(command=str(Path(sys.executable).parent / "agent-sdk"), args=argv, env=env)

    async def run() -> None:
        async with Client(stdio_client(params), mode="legacy", cache=None) as client:
            assert [t.name for t in (await client.list_tools()).tools] == [*SEARCH_ORDER, "get-sum"]
            assert "echo" in _found(await client.call_tool("search_tools", {"query": "echo back my message"}))
            echoed = await client.call_tool("call_tool", {"name": "echo", "arguments": {"message": "over stdio"}})
            assert not echoed.is_error and "over stdio" in json.dumps(echoed.model_dump(mode="json"))

    _run(run, 90)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_progress_of_a_call_through_call_tool_reaches_the_peer(served: Served, mode: str) -> None:
    """server-everything's long-running operation, called through `call_tool`: the peer's progress token goes
    with the real call, and each step comes back, at both generations."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        del total, message
        seen.append(progress)

    async def run() -> None:
        http, client = _client(served, ALICE, mode)
        async with http, client:
            arguments = {"name": "trigger-long-running-operation", "arguments": {"duration": 0.6, "steps": 3}}
            result = await client.call_tool("call_tool", arguments, progress_callback=on_progress)
            assert not result.is_error

    _run(run, 60)
    assert seen == [1.0, 2.0, 3.0]
