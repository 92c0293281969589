"""Elicitation and sampling through `/v1/mcp/tools`, for a 2026-07-28 peer in front of a 2026-07-28 upstream.

A real `agent-sdk serve` forwards `asking.py` (an `mcp` 2.x `MCPServer` pinned to 2026-07-28). The
upstream's `InputRequiredResult` reaches the peer with a `requestState` the gateway sealed; the
peer's retry with its answers reaches the upstream with the upstream's own state. A forged,
altered, replayed or misdirected state is refused with a JSON-RPC error saying which.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import free_port
from tests.processes import running

from ..conftest import Served, serving, url_connection
from ..replicas import STATE_KEY, redis_server

ASKING = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "asking.py"
MODERN = "2026-07-28"

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Served]]:
    """One `asking.py` upstream behind two gateways: one pins it to 2026-07-28, the other to the handshake."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with running([sys.executable, str(ASKING), "--port", str(port)], port=port, what="asking upstream"):
        with (
            serving(
                tmp_path_factory, "peer-input-modern", {"asking": url_connection(url, protocol="modern")}
            ) as modern,
            serving(
                tmp_path_factory, "peer-input-legacy", {"asking": url_connection(url, protocol="legacy")}
            ) as handshake,
        ):
            yield {"modern": modern, "handshake": handshake}


@pytest.fixture
def modern_gateway(gateways: dict[str, Served]) -> Served:
    return gateways["modern"]


async def _elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
    assert params.message == "What is your name?"
    return mt.ElicitResult(action="accept", content={"name": "Ada"})


async def _sample(context: ClientRequestContext, params: mt.CreateMessageRequestParams) -> mt.CreateMessageResult:
    return mt.CreateMessageResult(role="assistant", content=mt.TextContent(type="text", text="waves"), model="m")


def _text(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


@pytest.mark.parametrize("upstream", ["modern", "handshake"])
@pytest.mark.parametrize("peer", ["modern", "handshake"])
async def test_every_pairing_answers_through_the_peers_own_handlers(
    peer: str, upstream: str, gateways: dict[str, Served]
) -> None:
    # modern peer, modern upstream: the upstream's `InputRequiredResult` goes to the peer (its state
    # sealed), and the retry goes back to the upstream with the upstream's own state.
    # modern peer, handshake upstream: the upstream's mid-call request holds the call open and reaches
    # the peer as an `InputRequiredResult`; the retry's answer goes to the waiting upstream request.
    # handshake peer, handshake upstream: the upstream's request is asked of the peer on the call's SSE
    # answer, and the response the peer POSTs back reaches the waiting upstream request.
    # handshake peer, modern upstream: the pool drives the `InputRequiredResult` by asking the peer so.
    url = f"{gateways[upstream].url}/v1/mcp/tools"
    mode = "auto" if peer == "modern" else "legacy"
    async with httpx2.AsyncClient(timeout=30) as http:
        with anyio.fail_after(60):
            transport = streamable_http_client(url, http_client=http)
            async with Client(
                transport, mode=mode, elicitation_callback=_elicit, sampling_callback=_sample, cache=None
            ) as client:  # pyright: ignore[reportArgumentType]
                assert client.protocol_version == (MODERN if peer == "modern" else "2025-11-25")
                assert _text(await client.call_tool("ask_name", {})) == "Hello, Ada!"
                assert _text(await client.call_tool("ask_model", {})) == "model said: waves"
                assert _text(await client.call_tool("ask_both", {})) == "Ada: waves"
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as plain:  # pyright: ignore[reportArgumentType]
                # No handler: the upstream learns the caller cannot answer, and refuses cleanly.
                refused = await plain.call_tool("ask_name", {})
    assert refused.is_error
    if upstream == "modern":  # the request's `_meta` declared no elicitation
        assert "did not declare the form elicitation capability" in _text(refused)
    else:  # the pool's shared session declared it; its client refused for this caller
        assert "Elicitation not supported: the caller of this tool call cannot answer it" in _text(refused)


def _call(name: str, *, state: str | None = None, responses: dict[str, Any] | None = None) -> dict[str, Any]:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    params: dict[str, Any] = {"name": name, "arguments": {}, "_meta": envelope}
    if state is not None:
        params["requestState"] = state
    if responses is not None:
        params["inputResponses"] = responses
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _headers(name: str) -> dict[str, str]:
    return {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }


async def test_a_forged_altered_replayed_or_misdirected_request_state_is_refused(modern_gateway: Served) -> None:
    url = f"{modern_gateway.url}/v1/mcp/tools"
    async with httpx2.AsyncClient(timeout=30) as http:

        async def post(name: str, **kw: Any) -> dict[str, Any]:
            return (await http.post(url, json=_call(name, **kw), headers=_headers(name))).json()

        first = (await post("ask_name"))["result"]
        assert first["resultType"] == "input_required"
        ((key, request),) = first["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        state: str = first["requestState"]
        assert state.startswith("agent-sdk.rs1.")
        answers = {key: {"action": "accept", "content": {"name": "Grace"}}}

        altered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
        for bad in (altered, "agent-sdk.rs1.bm90LWEtc3RhdGU", "opaque-upstream-state"):
            error = (await post("ask_name", state=bad, responses=answers))["error"]
            assert error["code"] == -32602
            assert error["message"] == "requestState refused: it was not issued by this gateway, or it was altered"
        misdirected = (await post("ask_model", state=state, responses=answers))["error"]
        assert misdirected["message"] == "requestState refused: it was issued for another tool, not 'ask_model'"

        done = (await post("ask_name", state=state, responses=answers))["result"]
        assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Grace!"
        replayed = (await post("ask_name", state=state, responses=answers))["error"]
        assert replayed["code"] == -32602
        assert replayed["message"].startswith("requestState refused: it was already used")
    key_file = modern_gateway.state_root / "request-state.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert key_file.read_text().strip() not in modern_gateway.log_text()


@pytest.mark.parametrize("peer", ["modern", "handshake"])
async def test_concurrent_peers_each_answer_only_their_own_calls_question(
    peer: str, gateways: dict[str, Served]
) -> None:
    # Two peers call at once through one pooled handshake-era upstream session; each question reaches
    # the peer whose call asked it, and each greeting carries that peer's own answer.
    url = f"{gateways['handshake'].url}/v1/mcp/tools"
    mode = "auto" if peer == "modern" else "legacy"
    both_asked = anyio.Event()
    asked: list[str] = []
    greeted: dict[str, str] = {}

    def answering(name: str) -> Any:
        async def elicit(context: ClientRequestContext, params: mt.ElicitRequestParams) -> mt.ElicitResult:
            asked.append(name)
            if len(asked) == 2:
                both_asked.set()
            await both_asked.wait()  # both questions are out at once
            return mt.ElicitResult(action="accept", content={"name": name})

        return elicit

    async def one(name: str) -> None:
        async with httpx2.AsyncClient(timeout=30) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode=mode, elicitation_callback=answering(name), cache=None) as client:  # pyright: ignore[reportArgumentType]
                greeted[name] = _text(await client.call_tool("ask_name", {}))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "Ada")
            tg.start_soon(one, "Bob")
    assert sorted(asked) == ["Ada", "Bob"]
    assert greeted == {"Ada": "Hello, Ada!", "Bob": "Hello, Bob!"}


@pytest.mark.peers
async def test_a_retry_while_redis_is_away_says_retry_and_the_same_state_answers_once_it_is_back(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """With `--state-url`, a retry's `requestState` is claimed in Redis: while Redis is away the retry is a
    JSON-RPC error with `data.error` `state_unavailable` and a sentence that says retry (not code 0 and a
    traceback), and the same state and answers complete the call once Redis answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with (
        running([sys.executable, str(ASKING), "--port", str(port)], port=port, what="asking upstream"),
        redis_server(tmp_path_factory.mktemp("redis")) as redis,
    ):
        env = {"AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_STATE_KEY": STATE_KEY}
        with serving(
            tmp_path_factory, "peer-input-redis", {"asking": url_connection(url, protocol="modern")}, env=env
        ) as gateway:
            async with httpx2.AsyncClient(timeout=30) as http:

                async def post(**kw: Any) -> dict[str, Any]:
                    body = _call("ask_name", **kw)
                    return (
                        await http.post(f"{gateway.url}/v1/mcp/tools", json=body, headers=_headers("ask_name"))
                    ).json()

                first = (await post())["result"]
                ((key, _),) = first["inputRequests"].items()
                retry = {
                    "state": first["requestState"],
                    "responses": {key: {"action": "accept", "content": {"name": "Ada"}}},
                }
                redis.kill()
                error = (await post(**retry))["error"]
                assert error["data"]["error"] == "state_unavailable", error
                assert "state store is unavailable" in error["message"] and "retry" in error["message"], error
                redis.start()
                done = (await post(**retry))["result"]
                assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Ada!", done
