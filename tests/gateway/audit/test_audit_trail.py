"""The audit trail of a real `agent-sdk serve --state-url` (docs/audit.md): a mixed run of calls on every
surface (the `mcp` client at 2026-07-28 and 2025-11-25 and the TypeScript SDK's client on `/v1/mcp/tools`,
`/v1/mcp`'s `call_tool`, `POST /v1/tools/{name}`, a session turn, a rate-limited call), with
server-everything behind, leaves exactly one record per call in the audit file and in the Redis stream;
`agent-sdk audit tail|search` read them; with Redis gone the gateway keeps serving and says so once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.peers import node20, node_module

from ..conftest import HERE, ROOT, Served, Upstream, make_project, url_connection
from ..replicas import BEARER, OPERATOR, RedisServer, redis_server, replica

pytestmark = [pytest.mark.peers, pytest.mark.timeout(180)]

TS_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_client.mjs"
AUTH = {"Authorization": f"Bearer {BEARER}"}
LIMITS = '[[limit]]\nrate = "1/minute"\nper = ["principal", "tool"]\ntools = ["get-sum"]\n'


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[tuple[Served, RedisServer]]:
    root = tmp_path_factory.mktemp("audit")
    project = make_project(root / "project", {"everything": url_connection(everything.url)})
    (project / "agent" / "limits.toml").write_text(LIMITS)
    with redis_server(root / "redis") as store:
        served = replica(project, root / "state", store.url)
        try:
            yield served, store
        finally:
            served.stop()


def _file_records(served: Served) -> list[dict[str, Any]]:
    path = served.state_root / "audit" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _stream_records(url: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return [json.loads(fields["r"]) for _id, fields in client.xrange("agent-sdk:audit")]
    finally:
        client.close()


def _until(count: int, read: Any) -> list[dict[str, Any]]:
    """The records once `read()` holds `count` of them (the writer task batches them just after the calls)."""
    deadline = time.monotonic() + 15
    while ((records := read()) and len(records) < count) or not records:
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return records


async def _mcp_calls(url: str, mode: str) -> list[bool]:
    async with httpx2.AsyncClient(timeout=30, headers=AUTH) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                echo = await client.call_tool("echo", {"message": f"from {mode}"})
                fails = await client.call_tool("explode", {})
                return [echo.is_error, fails.is_error]


def _ts(url: str, mode: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
        "MCP_HEADERS": json.dumps(AUTH),
    }
    done = subprocess.run([node20(), str(TS_CLIENT), url, mode], env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}, "PYTHONPATH": str(ROOT), **env}
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=60)


def test_a_mixed_run_leaves_one_record_per_call_in_the_file_and_the_stream(
    deployment: tuple[Served, RedisServer],
) -> None:
    served, store = deployment
    tools_url = f"{served.url}/v1/mcp/tools"
    assert anyio.run(_mcp_calls, tools_url, "auto") == [False, True]
    assert anyio.run(_mcp_calls, tools_url, "legacy") == [False, True]
    ts_tools = _ts(tools_url, "tools")  # lookup, echo, and lookup with bad input
    assert ts_tools["badInput"]["isError"] is True
    ts_agent = _ts(f"{served.url}/v1/mcp", "agent")  # `call_tool` lookup (its ask turn calls nothing)
    assert ts_agent["callTool"]["ok"] is True
    with served.client(AUTH) as http:
        assert http.post("/v1/tools/lookup", json={"input": {"key": "k"}}).status_code == 200
        assert http.post("/v1/tools/get-sum", json={"input": {"a": 1, "b": 2}}).status_code == 200
        limited = http.post("/v1/tools/get-sum", json={"input": {"a": 1, "b": 2}})
        turn = http.post("/v1/session", json={"message": 'call lookup {"key": "t"}'}).json()
        deadline = time.monotonic() + 20
        while (done := http.get(f"/v1/session/{turn['sessionId']}").json())["status"] == "running":
            assert time.monotonic() < deadline, done
            time.sleep(0.05)
    assert limited.status_code == 429 and limited.json()["error"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 1
    assert done["status"] in ("waiting", "completed"), done

    expected = Counter(
        {
            ("mcp/tools", "echo", "ok"): 3,
            ("mcp/tools", "explode", "tool_error"): 2,
            ("mcp/tools", "lookup", "ok"): 1,
            ("mcp/tools", "lookup", "refused"): 1,
            ("mcp", "lookup", "ok"): 1,
            ("http", "lookup", "ok"): 1,
            ("http", "get-sum", "ok"): 1,
            ("http", "get-sum", "refused"): 1,
            ("session", "lookup", "ok"): 1,
        }
    )
    total = sum(expected.values())
    for records in (_until(total, lambda: _file_records(served)), _until(total, lambda: _stream_records(store.url))):
        seen = Counter((r["surface"], r["target"], r["outcome"]) for r in records)
        assert seen == expected
        assert {r["principal"] for r in records} == {records[0]["principal"]}
        assert records[0]["principal"].startswith("bearer:")
        assert all(r["requestId"] and r["method"] == "tools/call" and r["policies"] == [] for r in records)
        refused = next(r for r in records if r["target"] == "get-sum" and r["outcome"] == "refused")
        assert refused["reason"] == "rate_limited" and refused["decision"] == "deny"
        assert next(r for r in records if r["target"] == "echo")["connection"] == "everything"
        # Never the arguments or the result.
        assert not any("from auto" in json.dumps(r) or "arguments" in r for r in records)

    found = _cli("audit", "search", "--tool", "get-sum", "--outcome", "refused", env={"AGENT_SDK_STATE_URL": store.url})
    assert found.returncode == 0, found.stderr
    lines = [json.loads(line) for line in found.stdout.splitlines()]
    assert [(r["target"], r["outcome"]) for r in lines] == [("get-sum", "refused")]
    tail = _cli("audit", "tail", "-n", "2", "--state-root", str(served.state_root), env={})
    assert tail.returncode == 0, tail.stderr
    assert [(r["surface"], r["outcome"]) for r in map(json.loads, tail.stdout.splitlines())] == [
        ("http", "refused"),
        ("session", "ok"),
    ]
    with served.client({"Authorization": f"Bearer {OPERATOR}"}) as http:
        shown = http.get("/v1/audit", params={"tool": "get-sum"}).json()
    assert shown["source"] == "redis" and [r["outcome"] for r in shown["records"]] == ["refused", "ok"]
    with served.client(AUTH) as http:
        assert http.get("/v1/audit").status_code == 403  # a peer does not read the trail


def test_with_the_stream_down_the_gateway_keeps_serving_and_says_so_once(
    deployment: tuple[Served, RedisServer],
) -> None:
    served, store = deployment
    before = len(_file_records(served))
    store.kill()
    try:
        with served.client(AUTH) as http:
            for key in ("a", "b", "c"):
                assert http.post("/v1/tools/lookup", json={"input": {"key": key}}).status_code == 200
        records = _until(before + 3, lambda: _file_records(served))
        assert len(records) == before + 3
        deadline = time.monotonic() + 15
        while "audit stream in Redis cannot be written" not in served.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served.log_text().count("audit stream in Redis cannot be written") == 1
    finally:
        store.start()


def test_limits_file_errors_stop_serve_with_a_sentence(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    (project / "agent" / "limits.toml").write_text('[[limit]]\nrate = "lots"\nper = ["everyone"]\n')
    checked = _cli("validate", "--dir", str(project), env={})
    assert checked.returncode == 1 and "limits.toml: error: limit 1: rate 'lots' is not a rate" in checked.stdout
    done = _cli("serve", "--dir", str(project), "--port", "0", "--state-root", str(tmp_path / "s"), env={})
    assert done.returncode == 1
    assert "limits.toml: error: limit 1: rate 'lots' is not a rate" in done.stderr
    assert "per must name one or more of principal, tool, connection" in done.stderr
    assert "Traceback" not in done.stderr
