"""Tasks followed from any replica, and tasks whose replica or child died (`gateway/mcp/task_owners.py`).

server-everything over stdio (a child per replica, each keeping its tasks in memory) runs
`simulate-research-query` as a task; two `agent-sdk serve --state-url` replicas share Redis. A peer
polls through either replica (as round-robin nginx sends it), and the replica that did not start the
task asks its owner over Redis. When the owner is `kill -9`ed, or its child is, the task ends `failed`
with a reason: a poller sees it end, never an upstream error it cannot tell from a bad request.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from .conftest import Served, assert_clean
from .replicas import BEARER, redis_server, replica, replica_project

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.timeout(120)]

RESEARCH = "simulate-research-query"
HEADERS = {
    "Authorization": f"Bearer {BEARER}",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture
def two(tmp_path: Path) -> Iterator[list[Served]]:
    project = replica_project(tmp_path / "project")
    with redis_server(tmp_path / "redis") as redis:
        served = [replica(project, tmp_path / f"r{i}", redis.url) for i in range(2)]
        try:
            yield served
        finally:
            for s in served:
                s.stop()
        for s in served:
            assert_clean(s.log_text(), [BEARER])


async def _rpc(served: Served, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx2.AsyncClient(timeout=30) as http:
        answer = await http.post(f"{served.url}/v1/mcp/tools", json=body, headers=HEADERS)
    assert answer.status_code == 200, answer.text
    return answer.json()


async def _start(served: Served) -> str:
    made = await _rpc(served, "tools/call", {"name": RESEARCH, "arguments": {"topic": "tides"}, "task": {"ttl": 60000}})
    assert "result" in made, made
    return made["result"]["task"]["taskId"]


async def _until_ended(served: Served, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            got = await _rpc(served, "tasks/get", {"taskId": task_id})
            assert "result" in got, got  # never an error: the task is known, or known to be gone
            if got["result"]["status"] in ("completed", "failed", "cancelled"):
                return got["result"]
            await anyio.sleep(0.3)


async def test_a_task_started_on_one_replica_is_followed_to_its_result_through_another(two: list[Served]) -> None:
    task_id = await _start(two[0])
    ended = await _until_ended(two[1], task_id)
    assert ended["status"] == "completed" and ended["taskId"] == task_id
    result = await _rpc(two[1], "tasks/result", {"taskId": task_id})
    assert "tides" in str(result["result"]["content"])


async def test_a_task_whose_replica_was_killed_ends_failed_with_a_reason_on_another(two: list[Served]) -> None:
    task_id = await _start(two[0])
    os.kill(two[0].proc.pid, signal.SIGKILL)
    two[0].proc.wait(timeout=10)
    ended = await _until_ended(two[1], task_id)
    assert ended["status"] == "failed"
    assert "replica that ran it went away" in ended["statusMessage"] and "start it again" in ended["statusMessage"]
    result = (await _rpc(two[1], "tasks/result", {"taskId": task_id}))["result"]
    assert result["isError"] is True and "start it again" in result["content"][0]["text"]
    cancel = await _rpc(two[1], "tasks/cancel", {"taskId": task_id})
    assert cancel["error"]["code"] == -32602 and "already ended" in cancel["error"]["message"]


async def test_a_task_whose_stdio_child_was_killed_ends_failed_on_its_own_replica(two: list[Served]) -> None:
    task_id = await _start(two[0])
    os.kill(_stdio_child(two[0].proc.pid), signal.SIGKILL)
    ended = await _until_ended(two[0], task_id)
    assert ended["status"] == "failed" and "upstream session on this gateway ended" in ended["statusMessage"]


def _stdio_child(pid: int) -> int:
    """The server-everything child of the replica `pid`."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    found = [int(c) for c in children if b"server-everything" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert found, children
    return found[0]
