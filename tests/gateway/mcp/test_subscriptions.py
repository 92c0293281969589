"""Subscriptions through `/v1/mcp/tools`: server-everything's resource updates reach a 2026-07-28 peer
(`mcp` 2.x `Client.listen`) through the gateway; an upstream's list changes reach listening peers."""

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
from mcp.client.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged

from tests.gateway.mcp.test_offerings_peers import everything_stdio
from tests.gateway.mcp.test_peer_clients import _ts as ts_client  # pyright: ignore[reportPrivateUsage]

from ..conftest import Served, assert_clean, make_project, serve

WATCHED = "demo://resource/dynamic/text/1"
COUNTING = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "counting_server.py")


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


ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
HANDSHAKE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def _post(served: Served, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
    with served.client({**HANDSHAKE, **(headers or {})}) as client:
        return client.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def _rpc(served: Served, method: str, params: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    answer = _post(served, method, params, headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _session(served: Served, headers: dict[str, str] | None = None) -> str:
    initialized = _post(served, "initialize", INITIALIZE, headers)
    assert initialized.json()["result"]["capabilities"]["resources"]["subscribe"] is True
    return initialized.headers["mcp-session-id"]


def test_a_handshake_peer_subscribes_with_its_session_id_and_is_refused_without_one(served: Served) -> None:
    session = _session(served)  # a peer that declares nothing still gets one: its subscriptions need it
    assert session.startswith("agent-sdk.ps0.")
    with_session = {"Mcp-Session-Id": session}
    assert _rpc(served, "resources/subscribe", {"uri": WATCHED}, with_session)["result"] == {}
    assert _rpc(served, "resources/unsubscribe", {"uri": WATCHED}, with_session)["result"] == {}
    # Without a session nothing could carry the updates: an error that says what to do, never `{}`.
    refused = _rpc(served, "resources/subscribe", {"uri": WATCHED})
    assert "result" not in refused and refused["error"]["code"] == mt.INVALID_REQUEST
    assert "Mcp-Session-Id" in refused["error"]["message"] and "GET /v1/mcp/tools" in refused["error"]["message"]
    # An id this gateway did not seal is an unknown session: 404, so the client starts a new one (issue 45.4).
    forged = _post(served, "resources/subscribe", {"uri": WATCHED}, {"Mcp-Session-Id": session[:-4] + "AAAA"})
    assert forged.status_code == 404 and "not issued by this gateway" in forged.json()["error"]["message"]
    no_uri = _rpc(served, "resources/subscribe", {}, with_session)["error"]  # the schema's error, not a crash
    assert no_uri["code"] == mt.INVALID_PARAMS


def test_the_get_stream_needs_a_valid_session_id(served: Served) -> None:
    session = _session(served)
    with served.client() as http:
        stream = {"Accept": "text/event-stream"}
        assert http.get("/v1/mcp/tools", headers=stream).status_code == 405  # no session: nothing to stream
        forged = http.get("/v1/mcp/tools", headers={**stream, "Mcp-Session-Id": session[:-4] + "AAAA"})
        assert forged.status_code == 404 and "initialize again" in forged.json()["error"]["message"]
        assert http.get("/v1/mcp/tools", headers={"Mcp-Session-Id": session}).status_code == 406
        assert http.delete("/v1/mcp/tools", headers={"Mcp-Session-Id": session + "x"}).status_code == 404


@pytest.fixture(scope="module")
def two_principals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("subscriptions-principals")
    connections = {"everything": everything_stdio(advertise_tools=True, advertise_resources=True, allow_tools=["echo"])}
    project = make_project(root / "project", connections, tools=False)
    server = serve(project, root / "state", "--bearer-token", ALICE, "--bearer-token", BOB)
    yield server
    server.stop()
    assert_clean(server.log_text())


async def _until_closed(response: Any) -> None:
    with anyio.fail_after(10):
        async for _ in response.aiter_bytes():
            pass


def test_another_principals_session_id_is_refused_and_delete_ends_the_stream(two_principals: Served) -> None:
    alice, bob = {"Authorization": f"Bearer {ALICE}"}, {"Authorization": f"Bearer {BOB}"}
    session = _session(two_principals, alice)
    alices = {"Mcp-Session-Id": session}
    refused = _post(two_principals, "resources/subscribe", {"uri": WATCHED}, {**bob, **alices})
    assert refused.status_code == 404, refused.text  # another caller's session is unknown to this one
    assert "not issued by this gateway to this caller" in refused.json()["error"]["message"]
    with two_principals.client(bob) as http:
        assert http.get("/v1/mcp/tools", headers={"Accept": "text/event-stream", **alices}).status_code == 404
        assert http.delete("/v1/mcp/tools", headers=alices).status_code == 404
    assert _rpc(two_principals, "resources/subscribe", {"uri": WATCHED}, {**alice, **alices})["result"] == {}

    async def run() -> None:
        headers = {**alice, **alices, "Accept": "text/event-stream"}
        async with httpx2.AsyncClient(base_url=two_principals.url, timeout=30) as http:
            async with http.stream("GET", "/v1/mcp/tools", headers=headers) as first:
                assert first.status_code == 200 and first.headers["content-type"] == "text/event-stream"
                async with http.stream("GET", "/v1/mcp/tools", headers=headers) as second:
                    assert second.status_code == 200
                    await _until_closed(first)  # one stream per session: the newer one replaces it
                    assert (await http.delete("/v1/mcp/tools", headers={**alice, **alices})).status_code == 204
                    await _until_closed(second)

    anyio.run(run)
    ended = _post(two_principals, "resources/subscribe", {"uri": WATCHED}, {**alice, **alices})
    assert ended.status_code == 404 and "its DELETE ended it" in ended.json()["error"]["message"]


def test_the_typescript_sdk_client_gets_resource_updates_and_list_changes_on_its_get_stream(served: Served) -> None:
    # The TypeScript SDK negotiates 2025-11-25: it subscribes with the Mcp-Session-Id of its initialize and
    # reads notifications on the GET stream it opens after `initialized` (gateway/mcp/peers/streams.py).
    out = ts_client(
        f"{served.url}/v1/mcp/tools",
        "subscribe",
        extra={"MCP_WATCH": WATCHED, "MCP_ADD_TOOL": "late_tool_ts"},
    )
    assert out["sessionId"].startswith("agent-sdk.ps0.")
    assert out["subscribed"] == {} and out["unsubscribed"] == {}
    assert out["updated"]["params"]["uri"] == WATCHED
    assert out["listChanged"]["method"] == "notifications/tools/list_changed"


def test_serve_stops_on_ctrl_c_while_a_peer_holds_its_get_stream(tmp_path: Path) -> None:
    # Every TypeScript SDK peer holds a GET stream open: uvicorn waits for open connections before it
    # stops, so the streams must end when shutdown starts, or Ctrl-C would hang until the peers leave.
    connections = {"everything": everything_stdio(advertise_tools=True, advertise_resources=True, allow_tools=["echo"])}
    server = serve(make_project(tmp_path / "project", connections, tools=False), tmp_path / "state")
    try:
        session = _session(server)
        with server.client() as http:
            headers = {"Accept": "text/event-stream", "Mcp-Session-Id": session}
            with http.stream("GET", "/v1/mcp/tools", headers=headers) as stream:
                assert stream.status_code == 200
                server.stop()  # SIGINT; killed only if it has not exited after 20 s
                assert server.proc.returncode == 130, server.log_text()  # "interrupted", not killed (-9)
                assert list(stream.iter_bytes()) == []  # the stream ended cleanly, nothing half-sent
    finally:
        server.stop()
    assert_clean(server.log_text())
