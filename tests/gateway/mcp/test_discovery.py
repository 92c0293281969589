"""Discovery mode (`serve --discovery`, docs/discovery.md) on a real `agent-sdk serve` in front of three reference
servers: server-everything (HTTP), server-filesystem and mcp-server-git (stdio), with a Cedar policy that lets
Alice see everything and Bob only server-everything's tools. Peers: the `mcp` 2.x client at both generations and
the TypeScript SDK client.

`tools/list` is the three meta-tools; a search is ranked over what the caller may see, so Bob's answers, errors and
counts never name a filesystem or git tool; `call_tool` runs the real tool through the one executor and a hidden
name answers word for word as an unknown one.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.peers import node20, node_bin, node_module, py_peer

from ..conftest import HERE, Served, Upstream, assert_clean, make_project, serve
from ..policy.test_policy_surfaces import pid

ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
META = {"search_tools", "describe_tool", "call_tool"}
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
            f" args=[{str(shared)!r}], advertise_tools=True)\n",
            "git": f"{head}connection = define_connection(command={str(py_peer('mcp-server-git'))!r},"
            f" args=['--repository', {str(repo)!r}], advertise_tools=True)\n",
        },
    )
    (project / "agent" / "policies.cedar").write_text(_policy())
    server = serve(project, root / "state", "--bearer-token", ALICE, "--bearer-token", BOB, "--discovery")
    SHARED.append(str(shared))
    yield server
    server.stop()
    assert_clean(server.log_text(), secrets=[ALICE, BOB])


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
