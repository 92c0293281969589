"""What `serve --stdio` and a 2025-03-26 batch answer when a call is refused or its upstream says -32042: the
same JSON-RPC error the HTTP lane gives (its code, its sentence, its `data`), never code 0 "unhandled errors in
a TaskGroup" nor -32603 (issue 45 item 1, issue 42 finding 8).

The peers are the `mcp` Python client in both modes, the TypeScript SDK's stdio client, and a batch POSTed as
2025-03-26 clients sent them; the upstream is `asking.py` (an `mcp` 2.x `MCPServer` whose `open_url` raises
`UrlElicitationRequiredError`) on stdio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, UrlElicitationRequiredError
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from tests.peers import node20, node_module

from ..conftest import Served, assert_clean, make_project, serve

ROOT = Path(__file__).resolve().parents[3]
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
ASKING = ROOT / "tests" / "fixtures" / "upstreams" / "asking.py"
TS_CLIENT = ROOT / "tests" / "fixtures" / "peers_js" / "ts_stdio_errors_client.mjs"
SIGN_IN = {
    "mode": "url",
    "message": "Sign in to the example service",
    "url": "https://example.com/sign-in",
    "elicitationId": "sign-in-1",
}
LIMITS = '[[limit]]\nrate = "1/minute"\nper = ["principal", "tool"]\ntools = ["lookup"]\n'
ASKING_CONNECTION = (
    "from connections import define_connection\n\n"
    f"connection = define_connection(command={sys.executable!r}, args=[{str(ASKING)!r}, '--stdio'],"
    " advertise_tools=True, require_approval=['ask_name'])\n"
)


@pytest.fixture(scope="module")
def stdio_server(tmp_path_factory: pytest.TempPathFactory) -> StdioServerParameters:
    """`serve --stdio` on a project with `asking.py` (its `ask_name` held for approval, one second at most)
    and a one-call-a-minute limit on the authored `lookup`."""
    root = tmp_path_factory.mktemp("stdio-errors")
    project = make_project(root / "project", {"asking": ASKING_CONNECTION})
    (project / "agent" / "limits.toml").write_text(LIMITS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env |= {"AGENT_SDK_STATE_ROOT": str(root / "state"), "AGENT_SDK_APPROVAL_TIMEOUT": "1"}
    return StdioServerParameters(command=str(AGENT_SDK), args=["serve", "--stdio", "--dir", str(project)], env=env)


def _errors(params: StdioServerParameters, mode: str) -> dict[str, MCPError]:
    """Each refused call's `MCPError`, as the `mcp` client in `mode` raised it (one session, fresh limits)."""

    async def run() -> dict[str, MCPError]:
        raised: dict[str, MCPError] = {}
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode=mode, cache=None) as client:
                calls = {"open_url": ("open_url", {}), "approval": ("ask_name", {}), "limit": ("lookup", {"key": "k"})}
                assert not (await client.call_tool("lookup", {"key": "first"})).is_error
                for name, (tool, arguments) in calls.items():
                    with pytest.raises(MCPError) as caught:
                        await client.call_tool(tool, arguments)
                    raised[name] = caught.value
        return raised

    return anyio.run(run)


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_mcp_client_gets_each_refusals_own_code_and_data_over_serve_stdio(
    stdio_server: StdioServerParameters, mode: str
) -> None:
    raised = _errors(stdio_server, mode)
    url = raised["open_url"].error
    assert url.code == -32042, url
    assert url.data == {"elicitations": [SIGN_IN]}
    assert [e.url for e in UrlElicitationRequiredError.from_error(url).elicitations] == ["https://example.com/sign-in"]
    approval = raised["approval"].error
    assert approval.code == -32003 and (approval.data or {}).get("error") == "approval_denied", approval
    assert "TaskGroup" not in approval.message and "Traceback" not in approval.message
    limit = raised["limit"].error
    assert limit.code == -32029 and (limit.data or {})["error"] == "rate_limited", limit
    assert isinstance((limit.data or {})["retryAfterS"], int) and "retry after" in limit.message


def test_the_typescript_stdio_client_gets_minus_32042_with_its_elicitations(
    stdio_server: StdioServerParameters,
) -> None:
    env = {
        **(stdio_server.env or {}),
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
    }
    launch = json.dumps({"command": stdio_server.command, "args": stdio_server.args, "env": stdio_server.env})
    done = subprocess.run(
        [node20(), str(TS_CLIENT), launch], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["open_url"]["code"] == -32042 and out["open_url"]["name"] == "UrlElicitationRequiredError", out
    assert out["open_url"]["data"] == {"elicitations": [SIGN_IN]}
    assert out["ask_name"]["code"] == -32003 and out["ask_name"]["data"]["error"] == "approval_denied", out


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`agent-sdk serve` on the same project: `asking.py`'s `ask_name` held for approval, `lookup` limited."""
    root = tmp_path_factory.mktemp("batch-errors")
    project = make_project(root / "project", {"asking": ASKING_CONNECTION})
    (project / "agent" / "limits.toml").write_text(LIMITS)
    served = serve(project, root / "state", "--approval-timeout", "1")
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text())


def test_a_batch_without_a_protocol_version_gets_each_refusals_own_code(http_server: Served) -> None:
    def call(ident: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": tool, "arguments": arguments}
        return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}

    batch = [
        call(1, "lookup", {"key": "a"}),
        call(2, "lookup", {"key": "b"}),
        call(3, "ask_name", {}),
        call(4, "open_url", {}),
    ]
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    with http_server.client() as http:
        answered = http.post("/v1/mcp/tools", json=batch, headers=headers)
    assert answered.status_code == 200, answered.text
    first, limited, held, url = sorted(answered.json(), key=lambda a: a["id"])
    assert first["result"]["isError"] is False, first
    assert limited["error"]["code"] == -32029, limited
    assert limited["error"]["data"]["error"] == "rate_limited" and limited["error"]["data"]["retryAfterS"] > 0
    assert held["error"]["code"] == -32003 and held["error"]["data"]["error"] == "approval_denied", held
    assert url["error"] == {"code": -32042, "message": url["error"]["message"], "data": {"elicitations": [SIGN_IN]}}
    assert "TaskGroup" not in answered.text and "Traceback" not in answered.text
