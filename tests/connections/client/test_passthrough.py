"""Results pass through (`client/_passthrough.py`): a peer's answer spliced from the upstream's own bytes.

Against real upstreams, on both protocol generations: our `mcp` 2.x server (`fixtures/upstreams/both_eras.py`,
JSON and SSE answers, stateless) and the reference server-everything (TypeScript, handshake era, SSE,
stateful). Each test asks the upstream itself the same `tools/call` as a peer would (a plain `httpx2`
POST with the peer's id) and compares its answer with the one the pool's result splices for that peer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as _methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from connections import ClientPool, define_connection
from connections.client._passthrough import UpstreamResult, plain_call_result
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import running

pytestmark = pytest.mark.anyio

BOTH_ERAS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "both_eras.py"
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"
STAMP = {"name": "agent-sdk", "version": "9.9.9"}
"""The forwarding server's `serverInfo` stamp a 2026-07-28 answer carries."""
PEER_ID = "peer-7"


@pytest.fixture(scope="module", params=["json", "sse"])
def both_eras(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, str(BOTH_ERAS), "--port", str(port), *(["--sse"] if request.param == "sse" else [])]
    with running(cmd, port=port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def both_eras_json() -> Iterator[str]:
    port = free_port()
    with running([sys.executable, str(BOTH_ERAS), "--port", str(port)], port=port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def pool_on(url: str, version: str) -> AsyncIterator[ClientPool]:
    protocol = "modern" if version in MODERN_PROTOCOL_VERSIONS else "legacy"
    defn = define_connection(url=url, protocol=protocol).named("up", None)
    async with ClientPool({"up": defn}) as pool:
        yield pool


def _message(response: httpx2.Response) -> bytes:
    """The JSON-RPC answer's bytes: the body, or the data of the SSE event that answers `PEER_ID`."""
    if response.headers["content-type"].startswith("application/json"):
        return response.content
    for line in response.content.split(b"\n"):
        if line.startswith(b"data:") and b'"result"' in line and PEER_ID.encode() in line:
            return line[len(b"data:") :].strip()
    raise AssertionError(f"no answer in the SSE stream: {response.content[:300]!r}")


async def direct_answer(url: str, version: str, tool: str, arguments: dict[str, Any]) -> bytes:
    """What the upstream answers a peer's `tools/call` with id `PEER_ID` itself, as bytes."""
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": version,
    }
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if version in MODERN_PROTOCOL_VERSIONS:
        params["_meta"] = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_INFO_META_KEY: {"name": "peer", "version": "1"},
            CLIENT_CAPABILITIES_META_KEY: {},
        }
        headers |= {"mcp-method": "tools/call", "mcp-name": tool}
    async with httpx2.AsyncClient(timeout=30) as http:
        initialize = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "peer", "version": "1"}},
        }
        if version in HANDSHAKE_PROTOCOL_VERSIONS:
            opened = await http.post(url, json=initialize, headers=headers)
            if session := opened.headers.get("mcp-session-id"):
                headers["mcp-session-id"] = session
            await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        call = {"jsonrpc": "2.0", "id": PEER_ID, "method": "tools/call", "params": params}
        return _message(await http.post(url, content=json.dumps(call).encode(), headers=headers))


def _result_bytes(message: bytes) -> bytes:
    """The `result` member's bytes of an answer `mcp` writes (`jsonrpc`, `id`, then `result`)."""
    prefix = b'{"jsonrpc":"2.0","id":"' + PEER_ID.encode() + b'","result":'
    assert message.startswith(prefix) and message.endswith(b"}"), message[:120]
    return message[len(prefix) : -1]


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
async def test_a_result_nothing_changes_is_the_upstreams_own_bytes_with_the_peers_id(
    both_eras: str, version: str
) -> None:
    async with pool_on(both_eras, version) as pool:
        passed = await pool.call_tool_upstream("up", "echo", {"text": 'héllo ✓ "quoted" \\ }'})
    direct = await direct_answer(both_eras, version, "echo", {"text": 'héllo ✓ "quoted" \\ }'})
    assert passed.version == version
    spliced = passed.answer(PEER_ID, server_info=STAMP)
    assert spliced is not None
    if version == HANDSHAKE:
        assert spliced == direct  # byte for byte: nothing but the id had to change, and it is the peer's
        return
    # 2026-07-28: every byte of the upstream's result but its own `serverInfo` envelope, then ours.
    upstream, ours = _result_bytes(direct), _result_bytes(spliced)
    kept, _, envelope = upstream.partition(b',"_meta":')
    assert json.loads(envelope[:-1]) == {SERVER_INFO_META_KEY: {"name": "both-eras", "version": "1.0.0"}}
    assert ours.startswith(kept)
    answer = json.loads(spliced)
    assert answer["id"] == PEER_ID
    assert answer["result"]["_meta"] == {SERVER_INFO_META_KEY: STAMP}
    assert answer["result"]["resultType"] == "complete"
    assert answer["result"]["content"] == [{"type": "text", "text": 'Echo: héllo ✓ "quoted" \\ }'}]


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
async def test_structured_content_passes_through_checked_against_its_output_schema(
    both_eras: str, version: str
) -> None:
    async with pool_on(both_eras, version) as pool:
        passed = await pool.call_tool_upstream("up", "weather", {"city": "Oslo"})
    direct = await direct_answer(both_eras, version, "weather", {"city": "Oslo"})
    spliced = passed.answer(PEER_ID, server_info=STAMP)
    assert spliced is not None
    kept = _result_bytes(direct).partition(b',"_meta":')[0]
    assert _result_bytes(spliced).startswith(kept.removesuffix(b"}"))
    assert json.loads(spliced)["result"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
async def test_the_upstreams_reserved_meta_keys_are_rewritten_and_its_own_kept(both_eras: str, version: str) -> None:
    async with pool_on(both_eras, version) as pool:
        passed = await pool.call_tool_upstream("up", "meta", {})
    direct = json.loads(await direct_answer(both_eras, version, "meta", {}))
    spliced = passed.answer(PEER_ID, server_info=STAMP)
    assert spliced is not None
    answer = json.loads(spliced)
    expected_meta: dict[str, Any] = {"example.com/trace": "t-1"}
    if version == MODERN:
        assert SERVER_INFO_META_KEY in direct["result"]["_meta"]  # the upstream's own envelope: not passed off
        expected_meta[SERVER_INFO_META_KEY] = STAMP
    assert answer["result"]["_meta"] == expected_meta
    assert {k: v for k, v in answer["result"].items() if k != "_meta"} == {
        k: v for k, v in direct["result"].items() if k != "_meta"
    }


async def test_server_everythings_result_bytes_pass_through_with_the_peers_id(everything: str) -> None:
    async with pool_on(everything, HANDSHAKE) as pool:
        passed = await pool.call_tool_upstream("up", "echo", {"message": "héllo ✓ }"})
    direct = await direct_answer(everything, HANDSHAKE, "echo", {"message": "héllo ✓ }"})
    spliced = passed.answer(PEER_ID)
    assert passed.text is not None and spliced is not None
    assert passed.text in direct  # the TypeScript server's own bytes, verbatim (it writes `result` first)
    assert spliced == b'{"jsonrpc":"2.0","id":"' + PEER_ID.encode() + b'","result":' + passed.text + b"}"
    assert json.loads(spliced)["result"] == json.loads(direct)["result"]


async def test_an_answer_parsed_as_it_arrives_keeps_no_bytes_to_splice(both_eras_json: str) -> None:
    long = "é" * (600 * 1024)  # 1.2 MB of UTF-8: past the 1 MiB from which an answer is parsed as it arrives
    async with pool_on(both_eras_json, HANDSHAKE) as pool:
        passed = await pool.call_tool_upstream("up", "echo", {"text": long})
    assert passed.result["content"] == [{"type": "text", "text": f"Echo: {long}"}]
    assert passed.text is None  # never held whole: the result is forwarded re-encoded, in pieces
    assert passed.answer(PEER_ID) is None


# -- the check, once: `plain_call_result` is the schema's own verdict ------------------------------------

_SHAPES: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": "x"}]},
    {"content": [{"type": "text", "text": "x"}], "isError": False},
    {"content": [], "isError": True, "structuredContent": {"a": [1, None]}},
    {"content": [{"type": "text", "text": "x"}], "_meta": {"k": {"nested": None}}},
    {"content": [{"type": "text", "text": "x"}], "_meta": {"k": None}},
    {"content": [{"type": "text", "text": "x"}], "resultType": "complete"},
    {"content": [{"type": "text", "text": "x"}], "isError": False, "resultType": "complete", "_meta": {"a": 1}},
    {"content": [], "isError": True, "structuredContent": {"a": 1}, "resultType": "complete"},
    {"content": [{"type": "text", "text": "x"}], "isError": None},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": None},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 1}}]},
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]},
    {"content": [{"type": "text", "text": 5}]},
    {"content": [{"type": "text", "text": "x"}], "extra": 1},
    {"content": [{"type": "text", "text": "x"}], "resultType": "input_required"},
    {"content": "x"},
]


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_a_plain_result_is_one_the_versions_schema_accepts_and_dumps_unchanged(version: str) -> None:
    plain = 0
    for shape in _SHAPES:
        if not plain_call_result(shape, version):
            continue
        plain += 1
        assert _methods.serialize_server_result("tools/call", version, shape) == shape, shape
    assert plain >= 3  # the common shapes take the short way


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (b'{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"content":[]}', b'"content":[]'),
        (b'{"content":[1, 2],"_meta":{"io.modelcontextprotocol/x":1,"k":2}}', b'{"content":[1, 2]'),
        (b'{ "content" : [ {"_meta": {"inner": 1}} ] , "_meta" : {} , "isError" : false }', b'"isError" : false'),
        (
            b'{ "content" : [ {"_meta": {"inner": 1}} ] , "_meta" : {} , "isError" : false }',
            b'[ {"_meta": {"inner": 1}} ]',
        ),
        (b'{"_meta":{"io.modelcontextprotocol/serverInfo":{"_meta":{}}}}', b'{"resultType"'),
    ],
)
def test_only_the_top_level_meta_member_is_cut(text: bytes, kept: bytes) -> None:
    result = json.loads(text)
    answer = UpstreamResult(result, MODERN, text).answer(1, server_info={"s": 1})
    assert answer is not None
    assert kept in answer  # the rest of the upstream's bytes, as they were
    parsed = json.loads(answer)
    assert parsed["id"] == 1
    kept_meta = {k: v for k, v in result["_meta"].items() if "/" not in k}
    assert parsed["result"]["_meta"] == {**kept_meta, SERVER_INFO_META_KEY: {"s": 1}}
    assert parsed["result"]["resultType"] == "complete"
    rest = {k: v for k, v in parsed["result"].items() if k not in ("_meta", "resultType")}
    assert rest == {k: v for k, v in result.items() if k != "_meta"}
