"""Subscriptions through `/v1/mcp/tools`: server-everything's resource updates reach a 2026-07-28 peer
(`mcp` 2.x `Client.listen`) through the gateway; an upstream's list changes reach listening peers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged

from .conftest import Served, assert_clean, make_project, serve
from .test_offerings_peers import everything_stdio

WATCHED = "demo://resource/dynamic/text/1"
COUNTING = str(Path(__file__).resolve().parents[1] / "fixtures" / "upstreams" / "counting_server.py")


def counting_stdio(protocol: str, allow: list[str]) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{COUNTING!r}, 'stdio'], "
        f"advertise_tools=True, protocol={protocol!r}, allow_tools={allow!r})\n"
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("subscriptions")
    connections = {
        "everything": everything_stdio(
            advertise_tools=True, advertise_resources=True, allow_tools=["toggle-subscriber-updates", "echo"]
        ),
        # A 2026-07-28 stdio upstream: its change events come on the `subscriptions/listen` stream the
        # pool holds (a handshake-era upstream's notifications: server-everything's updates above).
        "counting": counting_stdio("modern", ["add_tool", "late_tool"]),
    }
    server = serve(make_project(root / "project", connections, tools=False), root / "state")
    yield server
    server.stop()
    assert_clean(server.log_text())


async def _first(events: list[ServerEvent], kind: type, within: float = 20) -> ServerEvent:
    with anyio.fail_after(within):
        while not any(isinstance(e, kind) for e in events):  # noqa: ASYNC110
            await anyio.sleep(0.05)
    return next(e for e in events if isinstance(e, kind))


def test_server_everythings_resource_updates_reach_a_listening_peer(served: Served) -> None:
    async def run() -> None:
        async with Client(f"{served.url}/v1/mcp/tools") as client:
            assert client.protocol_version == "2026-07-28"
            events: list[ServerEvent] = []
            updated: ServerEvent | None = None
            async with client.listen(resource_subscriptions=[WATCHED]) as subscription:
                assert subscription.honored.resource_subscriptions == [WATCHED]

                async def collect() -> None:
                    async for event in subscription:
                        events.append(event)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(collect)
                    # server-everything sends updates for what the gateway's session subscribed to, once
                    # this tool turns them on (at once, then every 5 s).
                    await client.call_tool("toggle-subscriber-updates", {})
                    updated = await _first(events, ResourceUpdated)
                    tg.cancel_scope.cancel()
            assert isinstance(updated, ResourceUpdated) and updated.uri == WATCHED

    anyio.run(run)


def test_an_upstreams_tool_list_change_reaches_a_listening_peer_and_the_next_listing(served: Served) -> None:
    tool = "late_tool"

    async def run() -> None:
        async with Client(f"{served.url}/v1/mcp/tools") as client:
            before = {t.name for t in (await client.list_tools()).tools}
            assert tool not in before
            events: list[ServerEvent] = []
            async with client.listen(tools_list_changed=True) as subscription:

                async def collect() -> None:
                    async for event in subscription:
                        events.append(event)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(collect)
                    await client.call_tool("add_tool", {"name": tool})
                    await _first(events, ToolsListChanged)
                    tg.cancel_scope.cancel()
            after = {t.name for t in (await client.list_tools(cache_mode="bypass")).tools}
            assert tool in after

    anyio.run(run)


def _rpc(served: Served, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    with served.client(headers) as client:
        answer = client.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_handshake_peer_subscribes_and_unsubscribes_an_offered_resource(served: Served) -> None:
    initialized = _rpc(
        served,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    assert initialized["result"]["capabilities"]["resources"]["subscribe"] is True
    assert _rpc(served, "resources/subscribe", {"uri": WATCHED})["result"] == {}
    assert _rpc(served, "resources/unsubscribe", {"uri": WATCHED})["result"] == {}
    refused = _rpc(served, "resources/subscribe", {})["error"]  # no uri: the schema's error, not a crash
    assert refused["code"] == mt.INVALID_PARAMS
