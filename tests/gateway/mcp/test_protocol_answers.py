"""Protocol answers a stock client acts on (issue 45 items 3 and 5): an unsupported `MCP-Protocol-Version` is the
spec's -32022 with `supported` and `requested`, answering the request's id, which the `mcp` client's own version
probe reads and retries on; a 2026-07-28 `tasks/get` from a client that did not declare the tasks extension is
-32021 (missing required client capability) naming the extension, as the `mcp` SDK's `require_client_extension`
answers. Both on HTTP and on `serve --stdio`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..conftest import Served, Upstream, make_project, serving, url_connection
from .test_tasks import _modern  # pyright: ignore[reportPrivateUsage]

TOKEN = "protocol-token-0123456789abcdef"
RESEARCH = "simulate-research-query"
TASKS = "io.modelcontextprotocol/tasks"
AGENT_SDK = Path(sys.executable).parent / "agent-sdk"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    connections = {"everything": url_connection(everything.url)}
    with serving(tmp_path_factory, "protocol-answers", connections, "--bearer-token", TOKEN) as served:
        yield served


def _client(server: Served, http: httpx2.AsyncClient, mode: str) -> Client:
    transport = streamable_http_client(f"{server.url}/v1/mcp/tools", http_client=http)
    return Client(transport, mode=mode, cache=None)


def test_the_mcp_clients_version_probe_reads_supported_and_requested_and_retries(server: Served) -> None:
    async def run() -> tuple[MCPError, mt.DiscoverResult, str]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            with anyio.fail_after(60):
                async with _client(server, http, "2026-07-28") as client:
                    with pytest.raises(MCPError) as refused:
                        await client.session.send_discover("2099-01-01")
                    data = mt.UnsupportedProtocolVersionErrorData.model_validate(refused.value.error.data)
                    retried = mt.DiscoverResult.model_validate(await client.session.send_discover(data.supported[-1]))
                    return refused.value, retried, client.protocol_version

    refused, retried, version = anyio.run(run)
    assert refused.error.code == mt.UNSUPPORTED_PROTOCOL_VERSION == -32022
    assert refused.error.data is not None and refused.error.data["requested"] == "2099-01-01"
    assert refused.error.data["supported"] == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert "2099-01-01" in refused.error.message and "2026-07-28" in refused.error.message
    assert "2026-07-28" in retried.supported_versions and version == "2026-07-28"


def test_tasks_get_from_a_client_without_the_tasks_extension_is_the_missing_capability_code(server: Served) -> None:
    created = _modern(server, TOKEN, "tools/call", {"name": RESEARCH, "arguments": {"topic": "x"}}, RESEARCH)
    assert created.status_code == 200, created.text
    task_id = created.json()["result"]["taskId"]

    async def run() -> MCPError:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
            with anyio.fail_after(60):
                async with _client(server, http, "2026-07-28") as client:
                    assert client.protocol_version == "2026-07-28"
                    request = mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id=task_id))
                    with pytest.raises(MCPError) as refused:
                        await client.session.send_request(request, mt.GetTaskResult)
                    return refused.value

    refused = anyio.run(run)
    assert refused.error.code == mt.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021, refused.error
    assert refused.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
    assert TASKS in refused.error.message
    # The same call declaring the extension is answered: the refusal is about the declaration, not the task.
    assert _modern(server, TOKEN, "tasks/get", {"taskId": task_id}).json()["result"]["taskId"] == task_id


def test_serve_stdio_answers_the_same_codes_to_the_mcp_client(tmp_path: Path) -> None:
    # `serve --stdio`: the version probe and `tasks/get` without the extension, from the same stock client.
    project = make_project(tmp_path / "project", {})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SDK_", "PYTEST_"))}
    env["AGENT_SDK_STATE_ROOT"] = str(tmp_path / "state")
    params = StdioServerParameters(command=str(AGENT_SDK), args=["serve", "--stdio", "--dir", str(project)], env=env)

    async def run() -> tuple[MCPError, MCPError]:
        with anyio.fail_after(90):
            async with Client(stdio_client(params), mode="2026-07-28", cache=None) as client:
                with pytest.raises(MCPError) as version:
                    await client.session.send_discover("2099-01-01")
                request = mt.GetTaskRequest(params=mt.GetTaskRequestParams(task_id="any"))
                with pytest.raises(MCPError) as task:
                    await client.session.send_request(request, mt.GetTaskResult)
                return version.value, task.value

    version, task = anyio.run(run)
    assert version.error.code == -32022 and version.error.data is not None
    assert version.error.data["requested"] == "2099-01-01" and "2026-07-28" in version.error.data["supported"]
    assert task.error.code == -32021, task.error  # was -32601 "Method not found"
    assert task.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
