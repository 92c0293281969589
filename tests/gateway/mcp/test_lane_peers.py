"""A real `agent-sdk serve` in front of an `mcp` 2.x upstream that speaks both protocol generations,
reached by the `mcp` 2.x `Client` in its default mode (2026-07-28) and in `mode="legacy"`.

Through the gateway, whatever the peer speaks, the upstream session is 2026-07-28 on the fast wire:
a parameter marked `x-mcp-header` reaches the upstream as its `Mcp-Param-*` header, the upstream's
`_meta` and structured content reach the peer, and a peer whose `Mcp-Param-*` header disagrees with
its body is refused with HEADER_MISMATCH (-32020) and HTTP 400, as the spec says. Through discovery mode's
`call_tool`, whose schema marks no parameter, a client sends no `Mcp-Param-*` header for the real tool's
arguments: the call is served (the gateway still mirrors the header upstream).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import free_port
from tests.processes import running

from ..conftest import Served, serving

BOTH_ERAS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "both_eras.py"
MODERN = "2026-07-28"


@pytest.fixture(scope="module")
def eras() -> Iterator[str]:
    """The both-eras upstream's connection definition."""
    port = free_port()
    with running([sys.executable, str(BOTH_ERAS), "--port", str(port)], port=port):
        yield (
            "from connections import define_connection\n\n"
            f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', advertise_tools=True)\n"
        )


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, eras: str) -> Iterator[Served]:
    with serving(tmp_path_factory, "lane-peers", {"eras": eras}) as served:
        yield served


@pytest.fixture(scope="module")
def found_gateway(tmp_path_factory: pytest.TempPathFactory, eras: str) -> Iterator[Served]:
    """The same upstream behind `serve --discovery` (docs/discovery.md)."""
    with serving(tmp_path_factory, "lane-peers-found", {"eras": eras}, "--discovery") as served:
        yield served


async def _through(url: str, mode: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(timeout=30) as http:
        with anyio.fail_after(60):
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                tools = await client.list_tools()  # also gives the client its Mcp-Param map
                routed = await client.call_tool("routed", {"region": "eu-west"})
                meta = await client.call_tool("meta", {})
                weather = await client.call_tool("weather", {"city": "Oslo"})
                return {
                    "version": client.protocol_version,
                    "tools": sorted(t.name for t in tools.tools),
                    "routed": routed.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "meta": meta.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "weather": weather.structured_content,
                }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_both_peer_generations_reach_a_2026_upstream_with_headers_and_meta(gateway: Served, mode: str) -> None:
    seen = await _through(f"{gateway.url}/v1/mcp/tools", mode)
    assert seen["version"] == (MODERN if mode == "auto" else "2025-11-25")
    assert {"routed", "meta", "weather", "echo"} <= set(seen["tools"])
    # The gateway's upstream session is 2026-07-28 whatever the peer speaks: the header is mirrored there.
    assert seen["routed"]["content"][0]["text"] == "eu-west via eu-west"
    assert seen["meta"]["_meta"]["example.com/trace"] == "t-1"
    assert seen["weather"] == {"city": "Oslo", "celsius": 21.5}
    if mode == "auto":  # the peer sees the gateway's identity, not the upstream's
        assert seen["meta"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "agent-sdk-tools"


@pytest.mark.anyio
async def test_a_disagreeing_mcp_param_header_is_a_400_header_mismatch(gateway: Served) -> None:
    envelope = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "routed", "arguments": {"region": "eu-west"}, "_meta": envelope},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "routed",
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        url = f"{gateway.url}/v1/mcp/tools"
        wrong = await http.post(url, json=body, headers={**headers, "mcp-param-region": "us-east"})
        right = await http.post(url, json=body, headers={**headers, "mcp-param-region": "eu-west"})
    assert wrong.status_code == 400
    assert wrong.json()["error"]["code"] == -32020
    assert "Mcp-Param-Region" in wrong.json()["error"]["message"]
    assert right.status_code == 200
    assert right.json()["result"]["content"][0]["text"] == "eu-west via eu-west"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_call_tool_of_a_tool_with_header_parameters_is_served_and_mirrors_the_header_upstream(
    found_gateway: Served, mode: str
) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        with anyio.fail_after(60):
            url = f"{found_gateway.url}/v1/mcp/tools"
            async with Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client:
                listed = await client.list_tools()  # the client's Mcp-Param map: call_tool's schema marks nothing
                assert {t.name for t in listed.tools} == {"search_tools", "describe_tool", "call_tool"}
                found = await client.call_tool("search_tools", {"query": "a header-mirrored argument"})
                [routed] = [t for t in found.structured_content["tools"] if t["name"] == "routed"]
                assert routed["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
                called = await client.call_tool("call_tool", {"name": "routed", "arguments": {"region": "eu-west"}})
                version = client.protocol_version
    assert version == (MODERN if mode == "auto" else "2025-11-25")
    assert not called.is_error, called
    assert called.content[0].text == "eu-west via eu-west"  # pyright: ignore[reportAttributeAccessIssue]
