"""Protocol answers a stock client acts on (issue 45 items 3 and 5): an unsupported `MCP-Protocol-Version` is the
spec's -32022 with `supported` and `requested`, answering the request's id, which the `mcp` client's own version
probe reads and retries on; a 2026-07-28 `tasks/get` from a client that did not declare the tasks extension is
-32021 (missing required client capability) naming the extension, as the `mcp` SDK's `require_client_extension`
answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ..conftest import Served, Upstream, serving, url_connection

TOKEN = "protocol-token-0123456789abcdef"
RESEARCH = "simulate-research-query"
TASKS = "io.modelcontextprotocol/tasks"


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


def _raw(server: Served, method: str, params: dict[str, Any], *, declares: bool, name: str | None = None) -> Any:
    """A 2026-07-28 request with the spec's envelope and headers, declaring the tasks extension or not."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}} if declares else {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-peer", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **({"Mcp-Name": name} if name else {}),
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}}
    with server.client(headers) as http:
        return http.post("/v1/mcp/tools", json=body)


def test_tasks_get_from_a_client_without_the_tasks_extension_is_the_missing_capability_code(server: Served) -> None:
    created = _raw(server, "tools/call", {"name": RESEARCH, "arguments": {"topic": "x"}}, declares=True, name=RESEARCH)
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
    assert _raw(server, "tasks/get", {"taskId": task_id}, declares=True).json()["result"]["taskId"] == task_id
