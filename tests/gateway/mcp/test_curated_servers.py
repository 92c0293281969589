"""Curated servers (`/v1/mcp/servers/<name>`) against server-everything, with the TypeScript SDK client and the
Python SDK client in both generations: a renamed tool, an overridden description and a hidden argument end to end;
the upstream receives the fixed value, the peer's schema lacks it, the audit names both tools, and a Cedar rule on
`context.server` decides. The gateway runs with `mcp.lock` pinned to everything's own definitions: the curated
rename and description are not a drift (pinning checks the upstream's definition)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.peers import node_bin, ts_script

from ..conftest import HERE, Served, Upstream, make_project, serve, url_connection

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
TS_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_curated_client.mjs"

DEMO = """\
from connections import define_server

server = define_server(
    title="Demo tools",
    version="2.1.0",
    instructions="Add ten to a number, or echo a message.",
    tools=[
        {
            "connection": "everything",
            "name": "get-sum",
            "rename": "add_ten",
            "description": "Adds ten to a number.",
            "set": {"b": 10},
            "hide": ["b"],
        },
        {"connection": "everything", "name": "echo", "title": "Echo back"},
    ],
)
"""
NARROW = """\
from connections import define_server

server = define_server(tools=[{"connection": "everything", "name": "echo"}, {"name": "get-sum"}])
"""
POLICY = """\
@id("everyone")
permit (principal, action, resource);

@id("no-echo-on-narrow")
forbid (principal, action == AgentSdk::Action::"tools/call", resource == AgentSdk::Tool::"echo")
when { context.server == "narrow" };
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("curated")
    project = make_project(root / "project", {"everything": url_connection(everything.url)})
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "demo.py").write_text(DEMO)
    (project / "agent" / "servers" / "narrow.py").write_text(NARROW)
    (project / "agent" / "policies.cedar").write_text(POLICY)
    # Pinned: the lock holds everything's own definitions; a curated rename or description is not a drift.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    pinned = subprocess.run(
        [str(AGENT_SDK), "pin", "--dir", str(project), "--state-root", str(root / "state")],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert pinned.returncode == 0 and (project / "mcp.lock").exists(), pinned.stderr
    served = serve(project, root / "state")
    yield served
    served.stop()


def _ts(url: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return ts_script(TS_CLIENT, url, tool, json.dumps(arguments))


def _audit(served: Served, count: int) -> list[dict[str, Any]]:
    """The audit trail's records once it holds `count` (its writer batches them just after the calls)."""
    path = served.state_root / "audit" / "audit.jsonl"
    deadline = time.monotonic() + 15
    while True:
        records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def test_the_ts_client_sees_the_view_and_the_upstream_gets_the_fixed_value(gateway: Served) -> None:
    out = _ts(f"{gateway.url}/v1/mcp/servers/demo", "add_ten", {"a": 5})
    assert out["serverInfo"]["name"] == "demo" and out["serverInfo"]["version"] == "2.1.0"
    assert out["instructions"] == "Add ten to a number, or echo a message."
    tools = {t["name"]: t for t in out["tools"]}
    assert sorted(tools) == ["add_ten", "echo"]  # nothing else of everything's, none of the authored tools
    add = tools["add_ten"]
    assert add["description"] == "Adds ten to a number."
    assert "b" not in add["inputSchema"]["properties"] and "b" not in add["inputSchema"].get("required", [])
    assert "a" in add["inputSchema"]["properties"]
    assert tools["echo"]["title"] == "Echo back"
    assert out["called"].get("isError") is not True
    assert "15" in out["called"]["content"][0]["text"]  # everything added 5 and the hidden b=10


async def _python(url: str, mode: str) -> tuple[list[str], str]:
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            # The peer tries to override the hidden argument: the fixed value wins.
            result = await client.call_tool("add_ten", {"a": 1, "b": 1000})
            block = result.content[0]
            return names, getattr(block, "text", "")


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_python_client_in_both_generations(gateway: Served, mode: str) -> None:
    names, text = anyio.run(_python, f"{gateway.url}/v1/mcp/servers/demo", mode)
    assert names == ["add_ten", "echo"]
    assert "11" in text and "1001" not in text


async def _call(url: str, name: str, arguments: dict[str, Any]) -> Any:
    async with httpx2.AsyncClient(timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
            listed = sorted(t.name for t in (await client.list_tools()).tools)
            try:
                return listed, await client.call_tool(name, arguments)
            except MCPError as exc:
                return listed, exc


def test_a_renamed_tools_real_name_is_not_on_the_view(gateway: Served) -> None:
    _listed, answer = anyio.run(_call, f"{gateway.url}/v1/mcp/servers/demo", "get-sum", {"a": 1, "b": 2})
    assert isinstance(answer, MCPError) and answer.error.message == "Unknown tool: get-sum"


def test_a_cedar_rule_on_the_servers_name_decides(gateway: Served) -> None:
    listed, answer = anyio.run(_call, f"{gateway.url}/v1/mcp/servers/narrow", "echo", {"message": "hi"})
    assert listed == ["get-sum"]  # echo is hidden on this server by the rule on context.server
    assert isinstance(answer, MCPError) and answer.error.message == "Unknown tool: echo"
    listed, answer = anyio.run(_call, f"{gateway.url}/v1/mcp/servers/demo", "echo", {"message": "hi"})
    assert "echo" in listed and not isinstance(answer, MCPError) and "Echo: hi" in answer.content[0].text


def test_the_audit_record_names_the_curated_and_the_real_tool(gateway: Served) -> None:
    anyio.run(_call, f"{gateway.url}/v1/mcp/servers/demo", "add_ten", {"a": 2})
    records = _audit(gateway, 1)
    mine = [r for r in records if r.get("servedAs") == "add_ten"]
    assert mine, records
    assert mine[-1]["target"] == "get-sum" and mine[-1]["connection"] == "everything"
    assert mine[-1]["surface"] == "mcp/servers/demo" and mine[-1]["outcome"] == "ok"


def test_an_unknown_server_is_a_404_with_a_sentence(gateway: Served) -> None:
    answer = httpx2.post(
        f"{gateway.url}/v1/mcp/servers/nope",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == 404
    assert "no curated server named 'nope'" in answer.text and "demo" in answer.text


NOTES = """\
from connections import define_server

server = define_server(
    instructions="Read the team's notes.",
    tools=[
        {
            "connection": "files",
            "name": "read_text_file",
            "rename": "read_notes",
            "description": "The team's notes.",
            "set": {"path": NOTES_PATH},
            "hide": ["path"],
        },
        {"connection": "files", "annotation": "readOnlyHint"},
    ],
)
"""


def test_serve_stdio_server_serves_a_curated_server_of_server_filesystem(tmp_path: Path) -> None:
    notes = tmp_path / "shared" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("ship on friday\n")
    project = tmp_path / "project"
    files = (
        "from connections import define_connection\n"
        f"connection = define_connection(command={str(node_bin('mcp-server-filesystem'))!r}, "
        f"args=[{str(notes.parent)!r}], advertise_tools=True)\n"
    )
    make_project(project, {"files": files}, tools=False)
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "notes.py").write_text(NOTES.replace("NOTES_PATH", repr(str(notes))))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env["AGENT_SDK_STATE_ROOT"] = str(tmp_path / "state")
    argv = ["serve", "--stdio", "--server", "notes", "--dir", str(project)]
    params = StdioServerParameters(command=str(AGENT_SDK), args=argv, env=env)

    async def run() -> tuple[dict[str, Any], Any]:
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode="legacy", cache=None) as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                return listed, await client.call_tool("read_notes", {})

    listed, read = anyio.run(run)
    assert "read_notes" in listed and "read_text_file" not in listed
    assert "write_file" not in listed and "list_directory" in listed  # read-only ones only
    assert "path" not in listed["read_notes"].input_schema.get("properties", {})
    assert listed["read_notes"].description == "The team's notes."
    assert not read.is_error and "ship on friday" in read.content[0].text  # the upstream got the fixed path


def test_serve_server_without_stdio_or_with_an_unknown_name_says_what_to_do(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project", {}, tools=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env["AGENT_SDK_STATE_ROOT"] = str(tmp_path / "state")
    done = subprocess.run(
        [str(AGENT_SDK), "serve", "--stdio", "--server", "nope", "--dir", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0 and "no curated server of that name" in done.stderr
    assert "Traceback" not in done.stderr
