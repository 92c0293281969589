"""Error sentences a user reads (issue #19 items 4 and 11): an HTTP 404 said as such with the fix, a
crashed child's exit status, no repeated "connection 'x':" prefix, no class names, and no promise of a
"next use" from a one-shot command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from connections import (
    Broker,
    ConnectionUnavailable,
    SessionInfo,
    TurnBuildError,
    UpstreamError,
    load_project,
)
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import running

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]

DYING = """\
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("dying")


@server.tool()
def die() -> str:
    \"\"\"Exits the whole server with status 3.\"\"\"
    os._exit(3)


server.run("stdio")
"""


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    port = free_port()
    cmd = [str(node_bin("mcp-server-everything")), "sse"]
    with running(cmd, port=port, env={"PORT": str(port)}, what="mcp-server-everything sse"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    port = free_port()
    cmd = [str(node_bin("mcp-server-everything")), "streamableHttp"]
    with running(cmd, port=port, env={"PORT": str(port)}, what="mcp-server-everything streamableHttp"):
        yield f"http://127.0.0.1:{port}"


def project_with(tmp_path: Path, body: str, name: str = "x") -> Path:
    folder = tmp_path / "agent" / "mcp-connections"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text("from connections import define_connection\n\n" + body + "\n")
    return tmp_path


async def test_a_legacy_sse_url_without_transport_says_404_and_how_to_fix_it(
    tmp_path: Path, everything_sse: str
) -> None:
    url = f"{everything_sse}/sse"
    async with Broker(load_project(project_with(tmp_path, f"connection = define_connection(url={url!r})"))) as broker:
        with pytest.raises(UpstreamError) as failed:
            await broker.pool.list_tools("x")
    assert str(failed.value) == (
        f"connection 'x': opening the connection failed: {url} answered HTTP 404; this looks like a legacy HTTP+SSE "
        'endpoint: add transport="sse" to the connection (in mcp.json: "type": "sse")'
    )
    # ... and with the fix it works.
    fixed = project_with(tmp_path, f"connection = define_connection(url={url!r}, transport='sse')")
    async with Broker(load_project(fixed)) as broker:
        assert "echo" in [t.name for t in await broker.pool.list_tools("x")]


async def test_a_wrong_path_says_404_and_what_to_check(tmp_path: Path, everything_http: str) -> None:
    url = f"{everything_http}/v1/nothing"
    async with Broker(load_project(project_with(tmp_path, f"connection = define_connection(url={url!r})"))) as broker:
        with pytest.raises(UpstreamError) as failed:
            await broker.pool.list_tools("x")
    assert "-32601" not in str(failed.value) and "Not Found" not in str(failed.value)
    assert str(failed.value) == (
        f"connection 'x': opening the connection failed: {url} answered HTTP 404; there is no Streamable HTTP MCP "
        "endpoint at this URL: check the path (servers often use /mcp), or, for a legacy HTTP+SSE server (its URL "
        'often ends in /sse), add transport="sse"'
    )


def dying_project(tmp_path: Path) -> Path:
    server = tmp_path / "dying.py"
    server.write_text(DYING)
    return project_with(tmp_path, f"connection = define_connection(command={sys.executable!r}, args=[{str(server)!r}])")


async def test_a_crashed_child_reports_its_exit_status(tmp_path: Path) -> None:
    async with Broker(load_project(dying_project(tmp_path))) as broker:
        with pytest.raises(ConnectionUnavailable) as died:
            await broker.pool.call_tool("x", "die", {})
    assert str(died.value) == (
        "connection 'x': tools/call 'die' failed: the server process exited with code 3; it is reopened on the next use"
    )


def test_a_one_shot_command_does_not_promise_a_next_use(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "mcp", "call", "x", "die", "--dir", str(dying_project(tmp_path))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "agent-sdk: error: connection 'x': tools/call 'die' failed: the server process exited with code 3"
    )


async def test_a_turn_problem_names_the_connection_once(tmp_path: Path) -> None:
    body = (
        "connection = define_connection(url='http://127.0.0.1:9/mcp', headers={'K': '${UNSET_19}'}, "
        "advertise_tools=True)"
    )
    project = load_project(project_with(tmp_path, body))
    env = {k: v for k, v in os.environ.items() if k != "UNSET_19"}
    async with Broker(project, environ=env) as broker:
        with pytest.raises(TurnBuildError) as failed:
            await broker.builder.build(SessionInfo(id="s", channel_id="http", mode="live", purpose="live", auth="a"))
    [problem] = failed.value.problems
    assert str(problem) == (
        "connection 'x': tools/list failed: header 'K' reads ${UNSET_19}, but UNSET_19 is not set; "
        "export UNSET_19 before starting agent-sdk"
    )
