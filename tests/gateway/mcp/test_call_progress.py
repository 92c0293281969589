"""Progress, log messages and cancellation through `/v1/mcp/tools`, with real peers and real upstreams.

Peers: the TypeScript SDK client (2025-11-25) and the `mcp` 2.x `Client` in both generations.
Upstreams: `server-everything`'s `trigger-long-running-operation` (TypeScript, handshake only, over
Streamable HTTP: the fast wire; over stdio: the SDK's dispatcher) and an upstream of ours that
records what it saw (`tests/fixtures/upstreams/patient_server.py`), in both generations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import Client

from tests.conftest import free_port
from tests.peers import node20, node_bin, node_module
from tests.processes import running

from ..conftest import HERE, Served, Upstream, everything_upstream, sent_as, serving, url_connection

TS_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_progress_client.mjs"
PATIENT = HERE.parent / "fixtures" / "upstreams" / "patient_server.py"
LONG = "trigger-long-running-operation"

pytestmark = pytest.mark.anyio


def _stdio_connection(command: str, *args: str, protocol: str = "auto") -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={command!r}, args={list(args)!r}, advertise_tools=True,"
        f" protocol={protocol!r})\n"
    )


@pytest.fixture(scope="module")
def patient() -> Iterator[Upstream]:
    port = free_port()
    with running([sys.executable, str(PATIENT), "--port", str(port)], port=port, what="patient upstream") as proc:
        yield Upstream(f"http://127.0.0.1:{port}/mcp", proc)


def _patient_connection(url: str, protocol: str) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={url!r}, advertise_tools=True, protocol={protocol!r},"
        " min_log_level='info', allow_tools=['steps', 'hang'])\n"
    )


@pytest.fixture(scope="module")
def everything() -> Iterator[Upstream]:
    """This module's own server-everything (the session's would outlive it, and `test_cli_mcp.py` checks
    that no server-everything is left running after its own)."""
    with everything_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, everything: Upstream, patient: Upstream) -> Iterator[Served]:
    """server-everything over Streamable HTTP (the fast wire) and the patient upstream pinned to the handshake."""
    connections = {"everything": url_connection(everything.url), "patient": _patient_connection(patient.url, "legacy")}
    with serving(tmp_path_factory, "progress", connections) as served:
        yield served


@pytest.fixture(scope="module")
def modern_gateway(tmp_path_factory: pytest.TempPathFactory, patient: Upstream) -> Iterator[Served]:
    """server-everything over stdio (the SDK's dispatcher) and the patient upstream pinned to 2026-07-28."""
    connections = {
        "everything": _stdio_connection(str(node_bin("mcp-server-everything")), "stdio"),
        "patient": _patient_connection(patient.url, "modern"),
    }
    with serving(tmp_path_factory, "progress-modern", connections) as served:
        yield served


@pytest.fixture(scope="module")
def discovery_gateways(tmp_path_factory: pytest.TempPathFactory, patient: Upstream) -> Iterator[dict[str, Served]]:
    """`serve --discovery` (docs/discovery.md) in front of the patient upstream, pinned to each generation."""
    with (
        serving(tmp_path_factory, "progress-found", {"patient": _patient_connection(patient.url, "legacy")},
                "--discovery") as legacy,
        serving(tmp_path_factory, "progress-found-modern", {"patient": _patient_connection(patient.url, "modern")},
                "--discovery") as modern,
    ):  # fmt: skip
        yield {"legacy": legacy, "modern": modern}


def _seen(upstream: Upstream) -> list[dict[str, Any]]:
    return httpx2.get(upstream.url.replace("/mcp", "/seen")).json()


def _ts(url: str, tool: str, arguments: dict[str, Any], level: str | None = None) -> dict[str, Any]:
    env = {**os.environ, "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent)}
    argv = [node20(), str(TS_CLIENT), url, tool, json.dumps(arguments), *([level] if level else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_ts_sdk_client_gets_progress_from_server_everything(gateway: Served) -> None:
    out = _ts(f"{gateway.url}/v1/mcp/tools", LONG, {"duration": 0.6, "steps": 3})
    assert out["protocolVersion"] == "2025-11-25"
    assert [p["progress"] for p in out["progress"]] == [1, 2, 3]
    assert all(p["total"] == 3 for p in out["progress"])
    assert "Long running operation completed" in out["result"]["content"][0]["text"]


def test_the_ts_sdk_client_gets_progress_from_a_stdio_upstream(modern_gateway: Served) -> None:
    out = _ts(f"{modern_gateway.url}/v1/mcp/tools", LONG, {"duration": 0.6, "steps": 3})
    assert [p["progress"] for p in out["progress"]] == [1, 2, 3]


@pytest.mark.parametrize("where", ["http", "stdio"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_python_sdk_client_gets_progress_in_both_generations(
    gateway: Served, modern_gateway: Served, mode: str, where: str
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    served = gateway if where == "http" else modern_gateway
    async with Client(f"{served.url}/v1/mcp/tools", mode=mode) as client:  # pyright: ignore[reportArgumentType]
        assert (client.protocol_version == "2025-11-25") == (mode == "legacy")
        with anyio.fail_after(30):
            result = await client.call_tool(LONG, {"duration": 0.6, "steps": 3}, progress_callback=on_progress)
    assert not result.is_error
    assert [s[0] for s in seen] == [1.0, 2.0, 3.0] and {s[1] for s in seen} == {3.0}


async def test_concurrent_callers_on_one_pooled_session_each_get_only_their_own_progress(
    modern_gateway: Served,
) -> None:
    """Two peers share the gateway's one stdio session to server-everything: the SDK's dispatcher
    routes each upstream notification by the upstream request's token, the lane by the peer's."""
    seen: dict[str, list[float]] = {"a": [], "b": []}

    async def one(name: str, steps: int) -> None:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            assert total == steps
            seen[name].append(progress)

        async with Client(f"{modern_gateway.url}/v1/mcp/tools", mode="legacy") as client:
            await client.call_tool(LONG, {"duration": 0.6, "steps": steps}, progress_callback=on_progress)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "a", 3)
            tg.start_soon(one, "b", 4)
    assert seen == {"a": [1.0, 2.0, 3.0], "b": [1.0, 2.0, 3.0, 4.0]}


def test_a_call_without_a_progress_token_keeps_the_plain_json_answer(gateway: Served) -> None:
    params: dict[str, Any] = {"name": "echo", "arguments": {"message": "x"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    plain = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=_HANDSHAKE, timeout=30)
    assert plain.headers["content-type"] == "application/json"
    params["_meta"] = {"progressToken": "p-1"}
    streamed = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=_HANDSHAKE, timeout=30)
    assert streamed.headers["content-type"] == "text/event-stream"
    assert json.loads(streamed.text.split("data: ")[-1])["result"] == plain.json()["result"]
    params["name"] = "no-such-tool"  # refused before the answer would turn into a stream
    unknown = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=_HANDSHAKE, timeout=30)
    assert unknown.headers["content-type"] == "application/json" and unknown.json()["error"]["code"] == -32602


_HANDSHAKE = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-11-25",
}


async def _cancelled_upstream(upstream: Upstream, before: int) -> list[dict[str, Any]]:
    """The cancellations the patient upstream recorded after the first `before` entries (waits up to 10 s)."""
    with anyio.fail_after(10):
        while True:
            found = [e for e in _seen(upstream)[before:] if "cancelled" in e]
            if found:
                return found
            await anyio.sleep(0.05)


async def _hang_started(upstream: Upstream, before: int) -> dict[str, Any]:
    with anyio.fail_after(10):
        while True:
            found = [e for e in _seen(upstream)[before:] if e.get("call") == "hang"]
            if found:
                return found[0]
            await anyio.sleep(0.05)


@pytest.mark.parametrize("through", ["direct", "call_tool"])
@pytest.mark.parametrize("peer", ["raw-post", "mcp-auto", "mcp-legacy"])
@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_a_peer_that_goes_away_mid_call_cancels_the_upstream_call(
    request: pytest.FixtureRequest, patient: Upstream, generation: str, peer: str, through: str
) -> None:
    """The peer closes its POST (a raw client dropping the connection; the `mcp` client at 2026-07-28,
    whose cancel is closing the POST) or sends `notifications/cancelled` (the `mcp` client at the
    handshake versions): the upstream of either generation sees its own call cancelled. The same through
    discovery mode's `call_tool` (docs/discovery.md): the cancel reaches the real tool's call."""
    if through == "direct":
        served: Served = request.getfixturevalue("gateway" if generation == "legacy" else "modern_gateway")
    else:
        served = request.getfixturevalue("discovery_gateways")[generation]
    url = f"{served.url}/v1/mcp/tools"
    before = len(_seen(patient))
    name, arguments = sent_as(through, "hang", {})
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    async with httpx2.AsyncClient(timeout=30) as http, AsyncExitStack() as stack:
        client = None if peer == "raw-post" else await stack.enter_async_context(Client(url, mode=peer[4:]))  # pyright: ignore[reportArgumentType]

        async def call() -> None:
            if client is None:
                await http.post(url, json=body, headers=_HANDSHAKE)
            else:
                await client.call_tool(name, arguments)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _hang_started(patient, before)
            tg.cancel_scope.cancel()  # the peer gives up
        cancelled = await _cancelled_upstream(patient, before)
    started = await _hang_started(patient, before)
    # The upstream's own request id; a handshake upstream is told with `notifications/cancelled`, a
    # 2026-07-28 one over HTTP has its POST closed (its wire has no client-to-server notifications).
    by = "notification" if generation == "legacy" else "closed"
    assert cancelled == [{"cancelled": "hang", "id": started["id"], "by": by}]


async def test_a_peers_notifications_cancelled_cancels_its_call_upstream(gateway: Served, patient: Upstream) -> None:
    before = len(_seen(patient))
    url = f"{gateway.url}/v1/mcp/tools"
    body = {"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {"name": "hang", "arguments": {}}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c-1", "reason": "x"}}
    async with httpx2.AsyncClient(timeout=30) as http:
        answers: list[httpx2.Response] = []

        async def call() -> None:
            answers.append(await http.post(url, json=body, headers=_HANDSHAKE))

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _hang_started(patient, before)
            other = await http.post(url, json={**cancel, "params": {"requestId": "c-2"}}, headers=_HANDSHAKE)
            assert other.status_code == 202  # an id not in flight: nothing happens
            accepted = await http.post(url, json=cancel, headers=_HANDSHAKE)
            assert accepted.status_code == 202
    assert answers[0].status_code == 202 and answers[0].content == b""  # no answer to a cancelled request
    assert len(await _cancelled_upstream(patient, before)) == 1


@pytest.mark.parametrize("generation", ["legacy", "modern"])
async def test_log_messages_reach_the_caller_at_or_above_its_level_and_the_connections_cap(
    gateway: Served, modern_gateway: Served, generation: str
) -> None:
    messages: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    served, mode = (gateway, "legacy") if generation == "legacy" else (modern_gateway, "auto")
    async with Client(f"{served.url}/v1/mcp/tools", mode=mode, logging_callback=on_log, log_level="debug") as client:  # pyright: ignore[reportArgumentType]
        if mode == "legacy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated at 2026-07-28; the handshake era has it
                await client.session.set_logging_level("debug")  # pyright: ignore[reportDeprecated]
        result = await client.call_tool("steps", {})
    assert result.content[0].text == "done"  # pyright: ignore[reportAttributeAccessIssue]
    # debug is below the connection's `min_log_level='info'`: never forwarded
    assert [(m.level, m.data, m.logger) for m in messages] == [
        ("info", {"said": "info"}, "patient"),
        ("warning", {"said": "warning"}, "patient"),
        ("error", {"said": "error"}, "patient"),
    ]


async def test_without_a_log_level_no_log_message_is_forwarded(modern_gateway: Served) -> None:
    messages: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        messages.append(params)

    async with Client(f"{modern_gateway.url}/v1/mcp/tools", logging_callback=on_log) as client:
        result = await client.call_tool("steps", {})
    assert result.content[0].text == "done" and messages == []  # pyright: ignore[reportAttributeAccessIssue]


def test_logging_set_level_applies_to_the_principals_later_calls(gateway: Served) -> None:
    leveled = _ts(f"{gateway.url}/v1/mcp/tools", "steps", {}, "warning")
    assert [m["level"] for m in leveled["logs"]] == ["warning", "error"]


def test_the_tools_endpoint_declares_logging(gateway: Served) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    answer = httpx2.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=_HANDSHAKE, timeout=30)
    assert "logging" in answer.json()["result"]["capabilities"]
