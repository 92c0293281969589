"""Handshake-era peers' GET streams and subscriptions, in process (`gateway/mcp/peers/streams.py`): what a stream
carries, its bounds and its end. The same behaviour against real peers: tests/gateway/mcp/test_subscriptions.py."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp.server.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError
from starlette.types import Message

from connections import NotOffered
from gateway.mcp.peers.caps import MAX_STREAMS, MAX_URIS
from gateway.mcp.peers.streams import IDLE_S, PeerStreams
from gateway.mcp.subscriptions import Subscriptions
from gateway.state.request_state import RequestStates

pytestmark = pytest.mark.anyio


class _Offerings:
    """Offers every `demo://` URI from one connection (the routing `Offerings` does, without upstreams)."""

    async def owner_of_resource(self, uri: str, viewer: str | None = None) -> str:
        if not uri.startswith("demo://"):
            raise NotOffered(f"no advertised connection offers resource {uri!r}")
        return "everything"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _streams(clock: _Clock | None = None) -> tuple[PeerStreams, Subscriptions, RequestStates]:
    subscriptions = Subscriptions({}, None, _Offerings())  # pyright: ignore[reportArgumentType]
    states = RequestStates.for_one_process()
    return PeerStreams(subscriptions, states, clock=clock or _Clock()), subscriptions, states


class _Peer:
    """One GET: what the gateway sent, and a way to go away."""

    def __init__(self, wanted: int) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gone = anyio.Event()
        self.wanted = wanted
        self.enough = anyio.Event()

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(dict(message))
        if len(self.notifications()) >= self.wanted:
            self.enough.set()

    def notifications(self) -> list[dict[str, Any]]:
        frames = b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")
        return [json.loads(line[6:]) for line in frames.decode().splitlines() if line.startswith("data: ")]


SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "headers": [(b"accept", b"text/event-stream")]}


async def test_a_stream_carries_list_changes_and_its_own_subscriptions_and_ends_when_the_peer_goes_away() -> None:
    streams, subscriptions, states = _streams()
    mine, other = states.seal_session("alice", {}), states.seal_session("alice", {})
    await streams.subscribe(mine, "alice", "demo://a")
    await streams.subscribe(other, "alice", "demo://b")
    peer = _Peer(wanted=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(streams.serve, SCOPE, peer.receive, peer.send, mine, "alice")
        await anyio.wait_all_tasks_blocked()
        assert peer.sent[0]["status"] == 200
        subscriptions.bus.publish_now(ResourceUpdated(uri="demo://b"))  # the other session's
        subscriptions.bus.publish_now(ResourceUpdated(uri="demo://a"))
        subscriptions.bus.publish_now(ToolsListChanged())
        with anyio.fail_after(5):
            await peer.enough.wait()
        peer.gone.set()
    assert peer.notifications() == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "demo://a"}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
    ]
    assert peer.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    await streams.unsubscribe(mine, "alice", "demo://a")
    await streams.unsubscribe(other, "alice", "demo://b")
    streams.close()


async def test_sessions_per_principal_and_uris_per_session_are_capped() -> None:
    streams, _, states = _streams()
    sessions = [states.seal_session("bob", {}) for _ in range(MAX_STREAMS + 1)]
    for session in sessions[:-1]:
        await streams.subscribe(session, "bob", "demo://x")
    with pytest.raises(MCPError, match=f"already holds {MAX_STREAMS} streams") as capped:
        await streams.subscribe(sessions[-1], "bob", "demo://x")
    assert capped.value.error.code == mt.INVALID_REQUEST
    await streams.subscribe(states.seal_session("carol", {}), "carol", "demo://x")  # another principal's own cap
    await streams.delete(sessions[0], "bob")  # DELETE frees a place
    await streams.subscribe(sessions[-1], "bob", "demo://x")

    one = sessions[1]
    for n in range(1, MAX_URIS):
        await streams.subscribe(one, "bob", f"demo://{n}")
    with pytest.raises(MCPError, match=f"already follows {MAX_URIS} resources"):
        await streams.subscribe(one, "bob", "demo://one-too-many")
    await streams.subscribe(one, "bob", "demo://1")  # again: already held, not counted twice


async def test_a_subscription_is_refused_without_a_valid_session_and_for_a_uri_nobody_offers() -> None:
    streams, _, states = _streams()
    with pytest.raises(MCPError, match="no Mcp-Session-Id: initialize first"):
        await streams.subscribe(None, "alice", "demo://a")
    with pytest.raises(MCPError, match="not issued by this gateway to this caller"):
        await streams.subscribe(states.seal_session("alice", {}), "mallory", "demo://a")
    with pytest.raises(MCPError, match="not issued by this gateway"):
        await streams.subscribe(RequestStates.for_one_process().seal_session("alice", {}), "alice", "demo://a")
    with pytest.raises(MCPError, match="no advertised connection offers") as unoffered:
        await streams.subscribe(states.seal_session("alice", {}), "alice", "nope://a")
    assert unoffered.value.error.code == mt.INVALID_PARAMS


async def test_subscriptions_without_a_stream_lapse_after_the_idle_time() -> None:
    clock = _Clock()
    streams, _, states = _streams(clock)
    sessions = [states.seal_session("bob", {}) for _ in range(MAX_STREAMS + 1)]
    for session in sessions[:-1]:
        await streams.subscribe(session, "bob", "demo://x")
    clock.now += IDLE_S + 1  # nobody opened a stream: their subscriptions are let go
    await streams.subscribe(sessions[-1], "bob", "demo://x")
    with pytest.raises(MCPError, match="already holds"):
        for session in sessions[:-1]:
            await streams.subscribe(session, "bob", "demo://x")


async def test_a_refused_subscribe_leaves_no_session_behind() -> None:
    streams, _, states = _streams()
    sessions = [states.seal_session("bob", {}) for _ in range(MAX_STREAMS)]
    for session in sessions:  # every one refused (not offered): none of them takes a place
        with pytest.raises(MCPError, match="no advertised connection offers"):
            await streams.subscribe(session, "bob", "nope://a")
    await streams.subscribe(states.seal_session("bob", {}), "bob", "demo://a")
