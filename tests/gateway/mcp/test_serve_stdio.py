"""`agent-sdk serve --stdio` launched from Claude Desktop's exact `mcp.json` shape, by the TypeScript
SDK's stdio client and by the MCP Inspector CLI (`--config`/`--server`): both list the project's tools
and call an authored one (`greet`) and an advertised one (`echo`, from the reference "everything"
server, imported from the project's own `mcp.json` with `"agent-sdk": {"advertiseTools": true}`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.peers import node20, node_bin, node_module

ROOT = Path(__file__).resolve().parents[3]
TS_STDIO = ROOT / "tests" / "fixtures" / "peers_js" / "ts_stdio_client.mjs"
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"


@pytest.fixture(scope="module")
def desktop_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project (authored `greet`, the "everything" server advertised) and Claude Desktop's config for it."""
    root = tmp_path_factory.mktemp("stdio")
    project = root / "my-agent"
    shutil.copytree(ROOT / "examples" / "quickstart" / "agent" / "tools", project / "agent" / "tools")
    (project / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {
                        "command": str(node_bin("mcp-server-everything")),
                        "args": ["stdio"],
                        "agent-sdk": {"advertiseTools": True},
                    }
                }
            },
            indent=2,
        )
    )
    assert AGENT_SDK.exists(), "the agent-sdk console script is missing; pip install -e . in the venv"
    # claude_desktop_config.json, as its "Edit Config" holds it (docs/desktop-clients.md).
    config = root / "claude_desktop_config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "my-agent": {
                        "command": str(AGENT_SDK),
                        "args": ["serve", "--stdio", "--dir", str(project)],
                        "env": {"AGENT_SDK_STATE_ROOT": str(root / "state")},
                    }
                }
            },
            indent=2,
        )
    )
    return config


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}


def test_the_typescript_stdio_client_lists_and_calls_authored_and_advertised_tools(desktop_config: Path) -> None:
    env = {**_env(), "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)}
    done = subprocess.run(
        [node20(), str(TS_STDIO), str(desktop_config), "my-agent"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert {"greet", "echo", "get-sum"} <= set(out["tools"])
    assert out["greet"]["isError"] is False and out["greet"]["structuredContent"] == {"greeting": "Hello, Ada!"}
    # A passthrough result is the upstream's JSON as sent: server-everything's echo omits `isError` (false).
    assert out["echo"].get("isError", False) is False
    assert out["echo"]["content"] == [{"type": "text", "text": "Echo: from a desktop"}]


def _inspector(config: Path, home: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(node_bin("mcp-inspector")), "--cli", "--config", str(config), "--server", "my-agent", *args,
         "--format", "json", "-q"],
        env={**_env(), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)["result"]


def test_the_inspector_cli_lists_and_calls_authored_and_advertised_tools(desktop_config: Path, tmp_path: Path) -> None:
    listed = _inspector(desktop_config, tmp_path, "--method", "tools/list")
    assert {"greet", "echo"} <= {t["name"] for t in listed["tools"]}
    greet = _inspector(
        desktop_config, tmp_path, "--method", "tools/call", "--tool-name", "greet", "--tool-arg", "name=Bo"
    )
    assert greet["structuredContent"] == {"greeting": "Hello, Bo!"} and not greet.get("isError")
    echo = _inspector(
        desktop_config, tmp_path, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"
    )
    assert echo["content"] == [{"type": "text", "text": "Echo: hi"}] and not echo.get("isError")


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_the_mcp_python_client_speaks_either_generation_to_serve_stdio(desktop_config: Path, mode: str) -> None:
    # docs/desktop-clients.md: stdin/stdout carry the handshake versions *and* 2026-07-28.
    entry = json.loads(desktop_config.read_text())["mcpServers"]["my-agent"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env={**_env(), **entry["env"]})

    async def run() -> mt.CallToolResult:
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                assert client.protocol_version == ("2026-07-28" if mode != "legacy" else "2025-11-25")
                assert {"greet", "echo"} <= {t.name for t in (await client.list_tools()).tools}
                return await client.call_tool("greet", {"name": "Cy"})

    greeted = anyio.run(run)
    assert greeted.structured_content == {"greeting": "Hello, Cy!"} and not greeted.is_error


COUNTING = ROOT / "tests" / "fixtures" / "upstreams" / "counting_server.py"
READ_THERE = """
from connections import ToolContext, define_tool


async def execute(value: dict, ctx: ToolContext) -> dict:
    result = await ctx.host.mcp.call_tool("there", "read", {"path": value["path"]})
    return {"text": result.content[0].text}


tool = define_tool(
    description="Read a file through the host-only connection 'there'.",
    input={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    effect="read",
    execute=execute,
)
"""


def test_stdio_children_run_in_the_project_folder_when_a_desktop_client_starts_serve_in_the_root(
    tmp_path: Path,
) -> None:
    # A desktop client starts `serve --stdio` in `/`: a child reading a file by a relative path must still
    # find it in the project folder (its own `cwd=`, relative to the project folder, when it says so).
    project = tmp_path / "my-agent"
    folder = project / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    (project / "sub").mkdir()
    (project / "notes.txt").write_text("from the project folder")
    (project / "sub" / "notes.txt").write_text("from sub/")
    start = f"from connections import define_connection\n\nconnection = define_connection(command={sys.executable!r}, "
    args = f"args=[{str(COUNTING)!r}, 'stdio']"
    (folder / "here.py").write_text(start + f"{args}, advertise_tools=True, allow_tools=['read'])\n")
    (project / "agent" / "host-connections").mkdir()
    (project / "agent" / "host-connections" / "there.py").write_text(start + f"{args}, cwd='sub')\n")
    (project / "agent" / "tools").mkdir()
    (project / "agent" / "tools" / "read_there.py").write_text(READ_THERE)
    env = {**_env(), "AGENT_SDK_STATE_ROOT": str(tmp_path / "state")}
    argv = ["serve", "--stdio", "--dir", str(project)]
    params = StdioServerParameters(command=str(AGENT_SDK), args=argv, env=env, cwd="/")

    async def run() -> tuple[mt.CallToolResult, mt.CallToolResult]:
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode="legacy", cache=None) as client:  # pyright: ignore[reportArgumentType]
                here = await client.call_tool("read", {"path": "notes.txt"})
                there = await client.call_tool("read_there", {"path": "notes.txt"})
                return here, there

    here, there = anyio.run(run)
    assert not here.is_error and [c.text for c in here.content if isinstance(c, mt.TextContent)] == [
        "from the project folder"
    ]
    assert not there.is_error and there.structured_content == {"text": "from sub/"}
