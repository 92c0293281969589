"""`serve --stdio` and a per-user connection (docs/oauth.md, "On serve --stdio"): no sign-in URL on a port
stdio mode never opens. The `mcp` SDK's stdio client calls `whoami` of a `grants="per_principal"` connection
(oidc-provider, the audience-checking MCP server): the answer names `agent-sdk mcp oauth docs --principal
stdio`; that command, run as written (headless), signs the stdio peer in, and the next call is served."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.oauth.peers import ResourceServer

from .per_user import per_user_project

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
ACCESS_TOKEN_TTL = 3600


async def _whoami(project: Path, state: Path) -> tuple[bool, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(state), "AGENT_SDK_STATE_ROOT": str(state)}
    params = StdioServerParameters(command=str(AGENT_SDK), args=["serve", "--stdio", "--dir", str(project)], env=env)
    with anyio.fail_after(90):
        async with Client(stdio_client(params), mode="legacy") as client:
            result = await client.call_tool("whoami", {})
    block = result.content[0]
    assert block.type == "text"
    return result.is_error, block.text


@pytest.mark.anyio
async def test_serve_stdio_names_the_login_command_instead_of_a_url_and_the_command_signs_in(
    tmp_path: Path, resource: ResourceServer
) -> None:
    project = per_user_project(tmp_path / "project", resource.url)
    state = tmp_path / "state"
    state.mkdir()
    failed, text = await _whoami(project, state)
    assert failed is True
    assert "/v1/oauth/sign-in" not in text and ":3000" not in text, text  # no URL on a port nobody listens on
    assert "agent-sdk mcp oauth docs --principal stdio" in text, text

    command = ["mcp", "oauth", "docs", "--principal", "stdio", "--dir", str(project), "--non-interactive"]
    env = {**os.environ, "AGENT_SDK_STATE_ROOT": str(state)}
    with anyio.fail_after(120):
        login = await anyio.run_process([str(AGENT_SDK), *command], env=env, check=False)
    assert login.returncode == 0, login.stderr.decode()

    failed, text = await _whoami(project, state)
    assert failed is False, text  # served with the grant the command stored for the stdio peer
    assert text == "agent-sdk"  # the subject the headless login (follow_redirects) signed in as at oidc-provider
