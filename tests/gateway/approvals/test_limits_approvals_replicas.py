"""Rate limits and human approval across two `agent-sdk serve --state-url` replicas on one Redis, with
server-everything behind (docs/audit.md): a limit of N calls a minute admits exactly N of 16 concurrent
callers spread over both replicas (429 with Retry-After on the JSON API, a JSON-RPC error with the retry
time on MCP, counted in the metrics); a call held for approval on one replica is approved or denied through
the other (the CLI, the HTTP route), no answer in time is a denial, and bad decisions get a sentence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
import redis

from connections import define_connection
from gateway.approvals import ApprovalDecided, ApprovalDenied, ApprovalGate, MemoryApprovals, RedisApprovals
from gateway.state._redis import redis_client

from ..conftest import ROOT, Served, Upstream, make_project, serve
from ..replicas import BEARER, OPERATOR, STATE_KEY, RedisServer, redis_server

pytestmark = [pytest.mark.peers, pytest.mark.timeout(180)]

LIMIT = 5
WAIT_S = 120
"""How long the replicas hold a call for approval: the CLI can take seconds to start on a loaded box."""
CALLERS = 16
PEER = {"Authorization": f"Bearer {BEARER}"}
OPS = {"Authorization": f"Bearer {OPERATOR}"}
MCP = {**PEER, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, everything: Upstream
) -> Iterator[tuple[Served, Served, RedisServer]]:
    root = tmp_path_factory.mktemp("limits")
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, advertise_tools=True, require_approval=['echo'])\n"
    )
    project = make_project(root / "project", {"everything": body})
    (project / "agent" / "limits.toml").write_text(f'[[limit]]\nrate = "{LIMIT}/minute"\ntools = ["get-sum"]\n')
    env = {
        "AGENT_SDK_BEARER_TOKEN": BEARER,
        "AGENT_SDK_OPERATOR_TOKEN": OPERATOR,
        "AGENT_SDK_STATE_KEY": STATE_KEY,
        "AGENT_SDK_APPROVAL_TIMEOUT": str(WAIT_S),
    }
    with redis_server(root / "redis") as store:
        env["AGENT_SDK_STATE_URL"] = store.url
        a = serve(project, root / "a", env=env)
        b = serve(project, root / "b", env=env)
        try:
            yield a, b, store
        finally:
            a.stop()
            b.stop()


def _cli(*args: str, token: str = OPERATOR) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    env.update({"PYTHONPATH": str(ROOT), "AGENT_SDK_OPERATOR_TOKEN": token})
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


def _counted(served: Served, name: str) -> float:
    with served.client(OPS) as http:
        text = http.get("/v1/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))


def test_a_limit_admits_exactly_n_of_16_concurrent_callers_across_two_replicas(
    replicas: tuple[Served, Served, RedisServer],
) -> None:
    a, b, _store = replicas
    statuses: list[int] = []
    waits: list[str] = []

    async def one(url: str) -> None:
        async with httpx2.AsyncClient(base_url=url, headers=PEER, timeout=30) as http:
            answer = await http.post("/v1/tools/get-sum", json={"input": {"a": 2, "b": 3}})
        statuses.append(answer.status_code)
        if answer.status_code == 429:
            assert answer.json()["error"] == "rate_limited"
            waits.append(answer.headers["retry-after"])

    async def all_at_once() -> None:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(CALLERS):
                    tg.start_soon(one, (a, b)[i % 2].url)

    anyio.run(all_at_once)
    assert Counter(statuses) == {200: LIMIT, 429: CALLERS - LIMIT}
    assert all(1 <= int(w) <= 60 for w in waits)
    # On MCP, over the limit is a JSON-RPC error carrying the retry time.
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "get-sum", "arguments": {"a": 1, "b": 1}},
    }
    with b.client(MCP) as http:
        error = http.post("/v1/mcp/tools", json=call).json()["error"]
    assert error["code"] == -32029 and error["data"]["error"] == "rate_limited"
    assert 1 <= error["data"]["retryAfterS"] <= 60 and "retry after" in error["message"]
    assert _counted(a, "agent_sdk_rate_limited_calls_total") + _counted(b, "agent_sdk_rate_limited_calls_total") == (
        CALLERS - LIMIT + 1
    )


class _Held(threading.Thread):
    """A call that blocks while it waits for an operator, run beside the test."""

    def __init__(self, served: Served, *, mcp: bool = False) -> None:
        super().__init__(daemon=True)
        self.served, self.mcp = served, mcp
        self.answer: httpx2.Response | None = None

    def run(self) -> None:
        with self.served.client(MCP if self.mcp else PEER) as http:
            if self.mcp:
                call = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "hi"}},
                }
                self.answer = http.post("/v1/mcp/tools", json=call)
            else:
                self.answer = http.post("/v1/tools/echo", json={"input": {"message": "held"}})


def _pending(served: Served) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    with served.client(OPS) as http:
        while time.monotonic() < deadline:
            if listed := http.get("/v1/approvals").json()["approvals"]:
                return listed[0]
            time.sleep(0.05)
    raise AssertionError("no call appeared in GET /v1/approvals")


def test_a_held_call_is_approved_through_the_other_replica_and_the_audit_names_the_approver(
    replicas: tuple[Served, Served, RedisServer],
) -> None:
    a, b, store = replicas
    held = _Held(a)
    held.start()
    pending = _pending(b)  # held on A, listed through B
    assert pending["tool"] == "echo" and pending["connection"] == "everything" and pending["surface"] == "http"
    listed = _cli("approvals", "list", "--url", b.url)
    assert listed.returncode == 0 and [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [pending["id"]]
    approved = _cli("approvals", "approve", pending["id"], "--url", b.url)
    assert approved.returncode == 0, approved.stderr
    held.join(timeout=30)
    assert held.answer is not None and held.answer.status_code == 200
    assert "held" in json.dumps(held.answer.json()["result"])
    # A second answer, from either replica, gets a sentence saying how it went.
    again = _cli("approvals", "deny", pending["id"], "--url", a.url)
    assert again.returncode == 1 and "already decided: it was approved by" in again.stderr
    client = redis.Redis.from_url(store.url, decode_responses=True)
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            records = [json.loads(f["r"]) for _i, f in client.xrange("agent-sdk:audit")]
            if mine := [r for r in records if r["target"] == "echo" and r["surface"] == "http"]:
                break
            time.sleep(0.05)
    finally:
        client.close()
    assert [(r["outcome"], r["approver"]) for r in mine] == [("ok", mine[0]["approver"])]
    assert mine[0]["approver"].startswith("bearer:") and mine[0]["approver"] != mine[0]["principal"]


def test_a_denied_call_on_mcp_is_a_json_rpc_error_and_bad_decisions_are_refused(
    replicas: tuple[Served, Served, RedisServer],
) -> None:
    a, b, _store = replicas
    held = _Held(b, mcp=True)
    held.start()
    pending = _pending(a)
    with a.client(PEER) as http:  # a peer is not an operator
        refused = http.post(f"/v1/approvals/{pending['id']}", json={"decision": "approve"})
    assert refused.status_code == 403 and refused.json()["error"] == "operator_required"
    with a.client(OPS) as http:
        unknown = http.post("/v1/approvals/apr_0000000000000000", json={"decision": "approve"})
        garbled = http.post(f"/v1/approvals/{pending['id']}", json={"decision": "maybe"})
        denied = http.post(f"/v1/approvals/{pending['id']}", json={"decision": "deny"})
    assert unknown.status_code == 404 and unknown.json()["error"] == "approval_not_found"
    assert garbled.status_code == 400 and "approve" in garbled.json()["message"]
    assert denied.status_code == 200 and denied.json()["decision"] == "denied"
    held.join(timeout=30)
    assert held.answer is not None
    error = held.answer.json()["error"]
    assert error["code"] == -32003 and error["data"]["error"] == "approval_denied"


@pytest.mark.anyio
@pytest.mark.parametrize("shared", [True, False], ids=["redis", "memory"])
async def test_no_answer_in_time_is_a_denial_and_a_late_approval_is_refused(
    replicas: tuple[Served, Served, RedisServer], shared: bool
) -> None:
    _a, _b, store = replicas
    client = redis_client(store.url)
    try:
        gate = ApprovalGate(
            {"everything": define_connection(url="http://127.0.0.1:9/mcp", require_approval=["echo"])},
            RedisApprovals(client) if shared else MemoryApprovals(),
            timeout_s=0.3,
        )
        assert gate.needed("echo", "everything") and not gate.needed("get-sum", "everything")
        with anyio.fail_after(10), pytest.raises(ApprovalDenied, match="none came within 0 s") as denied:
            await gate.wait(gate.pending_for("bearer:peer", "http", "echo", "everything"))
        approval = denied.value.extra["approval"]
        assert await gate.store.pending() == []
        with pytest.raises(ApprovalDecided, match="nobody answered before its deadline"):
            await gate.store.decide(approval, True, "bearer:operator")
    finally:
        await client.aclose()
