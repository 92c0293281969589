"""Tasks through `/v1/mcp/tools` (MCP 2025-11-25): server-everything's `simulate-research-query`, which runs
only as a task, driven by the TypeScript SDK client's task API; sealed task ids and their owner."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.peers import node20, node_module

from ..conftest import HERE, Served, Upstream, make_project, serving, url_connection

TS_TASK_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_task_client.mjs"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
RESEARCH = "simulate-research-query"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    connections = {"everything": url_connection(everything.url)}
    with serving(tmp_path_factory, "tasks", connections, "--bearer-token", ALICE, "--bearer-token", BOB) as served:
        yield served


def _ts(url: str, token: str, *args: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
        "MCP_HEADERS": json.dumps({"Authorization": f"Bearer {token}"}),
    }
    done = subprocess.run(
        [node20(), str(TS_TASK_CLIENT), url, *args], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _rpc(served: Served, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    with served.client(headers) as client:
        answer = client.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_tool_that_requires_a_task_completes_as_a_task_through_the_gateway(server: Served) -> None:
    out = _ts(f"{server.url}/v1/mcp/tools", ALICE, "run", RESEARCH, json.dumps({"topic": "gateways"}))
    assert out["protocolVersion"] == "2025-11-25"
    assert out["tasks"]["requests"]["tools"]["call"] == {}  # the capability the client checks
    assert out["execution"] == {"taskSupport": "required"}  # passed on from the upstream's listing
    kinds = [m["type"] for m in out["messages"]]
    assert kinds[0] == "taskCreated" and kinds[-1] == "result", out["messages"]
    assert "error" not in out
    assert "# Research Report: gateways" in out["result"]["content"][0]["text"]
    assert out["final"]["status"] == "completed"
    # The id the peer holds is sealed: not the upstream's 32 hex digits, and it routes back by itself.
    assert len(out["taskId"]) > 64 and out["final"]["taskId"] == out["taskId"]


def test_a_task_is_cancelled_through_the_gateway(server: Served) -> None:
    out = _ts(f"{server.url}/v1/mcp/tools", ALICE, "cancel", RESEARCH, json.dumps({"topic": "cancel me"}))
    assert out["cancelled"]["status"] == "cancelled"
    assert out["after"]["status"] == "cancelled"
    assert out["after"]["taskId"] == out["taskId"]


def test_another_principals_task_id_is_refused(server: Served) -> None:
    created = _rpc(server, ALICE, "tools/call", {"name": RESEARCH, "arguments": {"topic": "mine"}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    assert _rpc(server, ALICE, "tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
    # Bob, with the TypeScript SDK client: a JSON-RPC error, and nothing of Alice's task.
    bob = _ts(f"{server.url}/v1/mcp/tools", BOB, "get", task_id)
    assert bob["error"]["code"] == -32602, bob
    assert "not issued to this principal" in bob["error"]["message"]
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        refused = _rpc(server, BOB, method, {"taskId": task_id})
        assert refused["error"]["code"] == -32602 and "result" not in refused
    # Alice's task was not cancelled by Bob's attempt.
    assert _rpc(server, ALICE, "tasks/get", {"taskId": task_id})["result"]["status"] in ("working", "completed")


@pytest.mark.parametrize(
    "task_id",
    ["ba112af1e91e5895eee6b79554c45ee5", "", "gAAAAA" + "A" * 120, 42],
    ids=["an upstream id", "empty", "forged", "not a string"],
)
def test_a_task_id_the_gateway_did_not_seal_is_refused(server: Served, task_id: Any) -> None:
    answer = _rpc(server, ALICE, "tasks/get", {"taskId": task_id})
    assert answer["error"]["code"] == -32602, answer


def test_tasks_list_is_refused_with_a_sentence(server: Served) -> None:
    answer = _rpc(server, ALICE, "tasks/list", {})
    assert answer["error"]["code"] == -32601
    assert "shared by every principal" in answer["error"]["message"]


def test_a_task_call_of_an_authored_tool_is_refused_as_the_spec_says(server: Served) -> None:
    answer = _rpc(server, ALICE, "tools/call", {"name": "lookup", "arguments": {"key": "k"}, "task": {}})
    assert answer["error"]["code"] == -32601
    assert "cannot run as a task" in answer["error"]["message"]


def test_plain_calls_still_take_the_lane(server: Served) -> None:
    answer = _rpc(server, ALICE, "tools/call", {"name": "echo", "arguments": {"message": "plain"}})
    assert answer["result"]["content"][0]["text"] == "Echo: plain"
    with httpx2.Client(timeout=10) as client:  # and the gateway still refuses the unauthenticated
        assert client.post(f"{server.url}/v1/mcp/tools", json={}).status_code == 401


def test_a_task_id_routes_on_any_replica_that_shares_the_redis(tmp_path: Path, everything: Upstream) -> None:
    # Two replicas on one Redis share the sealing key; neither keeps any task state. The upstream is
    # server-everything over HTTP; each replica has its own pooled session to it.
    from ..replicas import BEARER, redis_server, replica

    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url)})
    with redis_server(tmp_path / "redis") as redis:
        one = replica(project, tmp_path / "one", redis.url)
        two = replica(project, tmp_path / "two", redis.url)
        try:
            created = _rpc(one, BEARER, "tools/call", {"name": RESEARCH, "arguments": {"topic": "r"}, "task": {}})
            task_id = created["result"]["task"]["taskId"]
            assert _rpc(one, BEARER, "tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
            # The other replica opens the id (no "not issued" refusal) and asks the owning connection.
            elsewhere = _rpc(two, BEARER, "tasks/get", {"taskId": task_id})
            # server-everything keeps tasks per MCP session: the other replica asks the replica whose session
            # made it, over Redis (gateway/mcp/task_owners.py, docs/http-api.md), and relays its answer.
            assert elsewhere["result"]["taskId"] == task_id, elsewhere
            assert elsewhere["result"]["status"] in ("working", "completed"), elsewhere
        finally:
            one.stop()
            two.stop()


def _modern(served: Served, token: str, method: str, params: dict[str, Any], name: str | None = None) -> Any:
    """A 2026-07-28 request declaring the tasks extension, with the envelope and headers the spec asks for."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-peer", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        **({"Mcp-Name": name} if name else {}),
    }
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": meta}}
    with served.client(headers) as client:
        return client.post("/v1/mcp/tools", json=body)


def test_a_2026_07_28_peer_runs_a_task_through_the_extension_bridge(server: Served) -> None:
    # No third-party 2026-07-28 tasks client exists to drive this yet: raw JSON-RPC with the spec's envelope.
    created = _modern(server, ALICE, "tools/call", {"name": RESEARCH, "arguments": {"topic": "v2"}}, RESEARCH)
    assert created.status_code == 200, created.text
    task = created.json()["result"]
    assert task["resultType"] == "task" and task["status"] == "working"
    assert task["pollIntervalMs"] == 1000 and "ttlMs" in task and len(task["taskId"]) > 64
    deadline = time.monotonic() + 30
    while True:
        got = _modern(server, ALICE, "tasks/get", {"taskId": task["taskId"]}).json()["result"]
        if got["status"] != "working" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got["status"] == "completed" and got["taskId"] == task["taskId"]
    assert "# Research Report: v2" in got["result"]["content"][0]["text"]
    # Bob cannot see it; tasks/update is refused with a sentence.
    refused = _modern(server, BOB, "tasks/get", {"taskId": task["taskId"]})
    assert refused.json()["error"]["code"] == -32602
    update = _modern(server, ALICE, "tasks/update", {"taskId": task["taskId"], "inputResponses": {}})
    assert update.json()["error"]["code"] == -32601


def test_a_2026_07_28_task_is_cancelled_through_the_extension_bridge(server: Served) -> None:
    created = _modern(server, ALICE, "tools/call", {"name": RESEARCH, "arguments": {"topic": "stop"}}, RESEARCH)
    task_id = created.json()["result"]["taskId"]
    cancelled = _modern(server, ALICE, "tasks/cancel", {"taskId": task_id})
    assert cancelled.json()["result"] == {"resultType": "complete"}
    assert _modern(server, ALICE, "tasks/get", {"taskId": task_id}).json()["result"]["status"] == "cancelled"


def test_the_tasks_extension_is_declared_to_2026_07_28_peers(server: Served) -> None:
    async def run() -> dict[str, Any] | None:
        headers = {"Authorization": f"Bearer {ALICE}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with Client(streamable_http_client(f"{server.url}/v1/mcp/tools", http_client=http)) as client:
                assert client.protocol_version == "2026-07-28"
                return client.server_capabilities.extensions

    assert "io.modelcontextprotocol/tasks" in (anyio.run(run) or {})
