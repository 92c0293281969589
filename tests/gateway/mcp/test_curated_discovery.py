"""A curated server in discovery mode (`define_server(discovery=True, always_visible=[...])`) over
server-everything, with the TypeScript SDK client and the Python SDK client in both generations: its
`tools/list` is the meta-tools and its pinned tool, search ranks its own view (the renamed, redescribed tool,
the hidden argument absent, nothing else of everything's), and `call_tool` runs the real tool through the one
executor (the hidden argument fixed, the audit naming both tools)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.mcp.test_curated_servers import _audit, _ts  # pyright: ignore[reportPrivateUsage]
from tests.gateway.mcp.test_offerings_peers import everything_stdio

from ..conftest import Served, assert_clean, make_project, serve

FIND = """\
from connections import define_server

server = define_server(
    discovery=True,
    always_visible=["say"],
    tools=[
        {"connection": "everything", "name": "get-sum", "rename": "add_ten", "set": {"b": 10}, "hide": ["b"],
         "description": "Adds ten to a number."},
        {"connection": "everything", "name": "echo", "rename": "say", "description": "Says a message back."},
    ],
)
"""
META = ["call_tool", "describe_tool", "search_tools"]
POLICY = """\
@id("everyone")
permit (principal, action, resource);

@id("no-echo-on-hidden")
forbid (principal, action == AgentSdk::Action::"tools/call", resource == AgentSdk::Tool::"echo")
when { context.server == "hidden" };
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("curated-discovery")
    project = make_project(root / "project", {"everything": everything_stdio(advertise_tools=True)}, tools=False)
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "find.py").write_text(FIND)
    (project / "agent" / "servers" / "hidden.py").write_text(FIND)  # the same view, under a rule on its name
    (project / "agent" / "policies.cedar").write_text(POLICY)
    server = serve(project, root / "state")
    yield server
    server.stop()
    assert_clean(server.log_text())


async def _python(url: str, mode: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
            listed = sorted(t.name for t in (await client.list_tools()).tools)
            found = await client.call_tool("search_tools", {"query": "add ten to a number", "limit": 20})
            called = await client.call_tool("call_tool", {"name": "add_ten", "arguments": {"a": 1, "b": 1000}})
            try:  # a renamed tool's real name is not on the view, in discovery mode too
                real: Any = await client.call_tool("call_tool", {"name": "get-sum", "arguments": {"a": 1, "b": 2}})
            except MCPError as exc:
                real = exc
            return {
                "listed": listed,
                "found": found.structured_content,
                "called": called.content[0].text,  # type: ignore[union-attr]
                "real": real,
            }


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_search_and_call_through_a_curated_server_in_discovery_mode(served: Served, mode: str) -> None:
    out = anyio.run(_python, f"{served.url}/v1/mcp/servers/find", mode)
    assert out["listed"] == sorted([*META, "say"])
    tools = {t["name"]: t for t in out["found"]["tools"]}
    assert set(tools) <= {"add_ten", "say"} and "add_ten" in tools  # its view only, nothing else of everything's
    assert tools["add_ten"]["description"] == "Adds ten to a number."
    assert "b" not in tools["add_ten"]["inputSchema"]["properties"]
    assert "get-sum" not in json.dumps(out["found"])
    assert "11" in out["called"] and "1001" not in out["called"]  # the hidden b=10, whatever the peer sent
    assert isinstance(out["real"], MCPError) and out["real"].error.message == "Unknown tool: get-sum"
    records = _audit(served, 1)
    mine = [r for r in records if r.get("servedAs") == "add_ten"]
    assert mine and mine[-1]["target"] == "get-sum" and mine[-1]["surface"] == "mcp/servers/find"


def test_the_ts_client_calls_through_call_tool_on_a_curated_server(served: Served) -> None:
    out = _ts(f"{served.url}/v1/mcp/servers/find", "call_tool", {"name": "add_ten", "arguments": {"a": 5}})
    assert sorted(t["name"] for t in out["tools"]) == sorted([*META, "say"])
    assert out["called"].get("isError") is not True and "15" in out["called"]["content"][0]["text"]


async def _hidden(url: str) -> list[Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
            answers: list[Any] = [
                sorted(t.name for t in (await client.list_tools()).tools),
                (
                    await client.call_tool(
                        "search_tools", {"query": "adds ten to a number, or says a message back", "limit": 20}
                    )
                ),
                (await client.call_tool("describe_tool", {"name": "say"})),
            ]
            try:
                answers.append(await client.call_tool("call_tool", {"name": "say", "arguments": {"message": "x"}}))
            except MCPError as exc:
                answers.append(exc.error.message)
            return answers


def test_a_tool_the_policy_hides_on_a_curated_server_is_never_found_described_or_called(served: Served) -> None:
    listed, found, described, called = anyio.run(_hidden, f"{served.url}/v1/mcp/servers/hidden")
    assert listed == META  # `say` is pinned, but hidden on this server by the rule on context.server
    assert [t["name"] for t in found.structured_content["tools"]] == ["add_ten"]
    assert "say" not in json.dumps(found.structured_content) and "echo" not in json.dumps(found.structured_content)
    assert described.is_error and described.content[0].text == "Unknown tool: say"
    assert called == "Unknown tool: say"
