"""Caps per principal, not per process (`gateway/mcp/peers/caps.py`): a caller at its cap is refused with a
sentence, and another caller is still served.

On a real `agent-sdk serve --max-connections 12` (so 3 streams per principal) with two bearer principals,
the `mcp` 2.x Python client at 2026-07-28 opens `subscriptions/listen` streams: one principal's fourth is
refused, so are more than `MAX_URIS` URIs in one filter, and the other principal still listens and calls.
In process: held calls and waiting questions per principal, and a call that ends drops its questions.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from connections.serving import CallContext, CallRequest, current_call
from gateway.mcp.call_stream import SseAnswer, stream_answer
from gateway.mcp.peers.asks import PeerAsks
from gateway.mcp.peers.calls import PeerCalls
from gateway.mcp.peers.caps import MAX_STREAMS, MAX_URIS, AtCap, stream_cap
from gateway.mcp.peers.held import HeldCalls
from gateway.mcp.peers.input import peer_input
from gateway.state.request_state import RequestStates

from ..conftest import Served, assert_clean, make_project, serve

pytestmark = pytest.mark.anyio

ALICE = "alice-caps-token-0123456789"
BOB = "bob-caps-token-0123456789ab"
MAX_CONNECTIONS = 12
NOTES = Path(__file__).resolve().parents[3] / "examples" / "quickstart" / "servers" / "notes_server.py"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("caps")
    notes = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(NOTES)!r}], advertise_tools=True)\n"
    )
    project = make_project(root / "project", {"notes": notes}, tools=False)
    flags = ("--bearer-token", ALICE, "--bearer-token", BOB, "--max-connections", str(MAX_CONNECTIONS))
    server = serve(project, root / "state", *flags)
    yield server
    server.stop()
    assert_clean(server.log_text(), [ALICE, BOB])


@asynccontextmanager
async def _client(served: Served, token: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        transport = streamable_http_client(f"{served.url}/v1/mcp/tools", http_client=http)
        async with Client(transport, cache=None) as client:  # pyright: ignore[reportArgumentType]
            assert client.protocol_version == "2026-07-28"
            yield client


def test_the_stream_cap_is_a_quarter_of_max_connections_at_most() -> None:
    assert stream_cap(1000) == MAX_STREAMS
    assert stream_cap(MAX_CONNECTIONS) == 3
    assert stream_cap(2) == 1


async def test_one_principal_at_its_stream_cap_is_refused_and_another_still_listens(served: Served) -> None:
    cap = stream_cap(MAX_CONNECTIONS)
    with anyio.fail_after(60):
        async with _client(served, ALICE) as alice, AsyncExitStack() as streams:
            for _ in range(cap):
                await streams.enter_async_context(alice.listen(tools_list_changed=True))
            # As many tries as would fill every connection the server keeps: none past its cap, so none of
            # them can lock the other principal out (each refused try's connection is free again at once).
            for _ in range(MAX_CONNECTIONS):
                with pytest.raises(
                    MCPError, match=f"this caller already holds {cap} streams on this gateway"
                ) as refused:
                    async with alice.listen(tools_list_changed=True):
                        pass
                assert "close one" in refused.value.error.message
            too_many = [f"demo://resource/{n}" for n in range(MAX_URIS + 1)]
            with pytest.raises(MCPError, match=f"names {MAX_URIS + 1} resources and one stream follows at most"):
                async with alice.listen(resource_subscriptions=too_many):
                    pass

            # The other principal: its own streams, up to its own cap, and its calls.
            async with _client(served, BOB) as bob, AsyncExitStack() as bobs:
                for _ in range(cap):
                    await bobs.enter_async_context(bob.listen(tools_list_changed=True))
                assert any(t.name == "list_notes" for t in (await bob.list_tools()).tools)
                assert not (await bob.call_tool("list_notes", {})).is_error
            assert not (await alice.call_tool("list_notes", {})).is_error  # at its stream cap, it still calls

        async with _client(served, ALICE) as alice:  # its streams ended: its places are back
            async with alice.listen(tools_list_changed=True) as again:
                assert again.honored.tools_list_changed


# In process: held calls and waiting questions.


async def _asks_in_the_background() -> dict[str, Any]:
    """A call whose upstream asks a question on a task of its own (as the SDK runs an upstream's request
    handler) and then ends without waiting for the answer (an upstream that gave up)."""
    context = current_call()
    assert context is not None and context.elicitation is not None
    asked = context.elicitation
    question = asyncio.get_running_loop().create_task(asked({"message": "name?", "requestedSchema": {}}))
    _QUESTIONS.append(question)
    await asyncio.sleep(0)  # the question is out
    return {"content": [], "isError": False}


_QUESTIONS: list[asyncio.Task[dict[str, Any]]] = []


async def _waits_forever() -> dict[str, Any]:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def test_held_calls_are_capped_per_principal_and_another_principal_still_holds_its_own() -> None:
    held_calls = HeldCalls(per_principal=3)
    alices = [held_calls.start("alice", "t", _asking(), _waits_forever) for _ in range(3)]
    with pytest.raises(AtCap, match="this caller already has 3 calls held waiting for its answers") as refused:
        held_calls.start("alice", "t", _asking(), _waits_forever)
    assert refused.value.error.code == -32600
    bobs = held_calls.start("bob", "t", _asking(), _waits_forever)
    assert held_calls.held_by("alice") == 3 and held_calls.held_by("bob") == 1
    for held in [*alices, bobs]:
        assert held.task is not None
        held.task.cancel()
    with anyio.fail_after(5):
        while held_calls.held_by("alice"):  # noqa: ASYNC110  # each cancelled task lets go of its place
            await asyncio.sleep(0)
    again = held_calls.start("alice", "t", _asking(), _waits_forever)
    assert again.task is not None
    again.task.cancel()


async def test_a_held_call_that_ends_drops_its_questions_at_once() -> None:
    held_calls = HeldCalls()  # the questions would wait HOLD_TIMEOUT_S (300 s) for an answer
    _QUESTIONS.clear()
    held = held_calls.start("alice", "t", _asking(), _asks_in_the_background)
    with anyio.fail_after(5):
        first = await held_calls.next(held)
        # the question came first: the call is still held, then it ends with its result
        assert first["resultType"] == "input_required"
        assert await held_calls.next(held) == {"content": [], "isError": False}
        with pytest.raises(MCPError, match="the tool call this request belongs to has ended"):
            await _QUESTIONS[0]  # the upstream's request gets an error answer now, not in 300 s
    assert held_calls.held_by("alice") == 0


async def test_waiting_questions_are_capped_per_principal_and_another_principal_is_still_asked() -> None:
    asks = PeerAsks(per_principal=2)
    written: list[dict[str, Any]] = []
    call = CallContext()
    loop = asyncio.get_running_loop()
    alices = [
        loop.create_task(asks.ask("alice", written.append, "elicitation/create", {}, call=call)) for _ in range(2)
    ]
    with anyio.fail_after(5):
        while len(written) < 2:  # noqa: ASYNC110
            await asyncio.sleep(0)
    with pytest.raises(AtCap, match="this caller already has 2 questions"):
        await asks.ask("alice", written.append, "elicitation/create", {}, call=call)
    bobs = loop.create_task(asks.ask("bob", written.append, "elicitation/create", {}, call=CallContext()))
    with anyio.fail_after(5):
        while len(written) < 3:  # noqa: ASYNC110
            await asyncio.sleep(0)
    assert asks.answer("bob", {"jsonrpc": "2.0", "id": written[2]["id"], "result": {"action": "decline"}})
    with anyio.fail_after(5):
        assert await bobs == {"action": "decline"}

    asks.ended(call)  # their call is over: both end now
    with anyio.fail_after(5):
        for question in alices:
            with pytest.raises(MCPError, match="the tool call this request belongs to has ended"):
                await question
    assert asks.waiting_for("alice") == 0 and len(asks) == 0


def _asking() -> CallContext:
    return CallContext(CallRequest(capabilities={"elicitation": {}}))


async def test_a_handshake_peers_call_that_ends_ends_its_questions_at_once() -> None:
    # The route's own wiring (`peer_input`, then the SSE answer writer, as the lane runs them) for a
    # handshake peer whose session declared elicitation: its call's questions wait in the runtime's `PeerAsks`.
    asks = PeerAsks()
    runtime: Any = SimpleNamespace(request_states=RequestStates.for_one_process(), held=HeldCalls())
    channel = SseAnswer(asks, "alice")
    tool: Any = SimpleNamespace(name="ask_name", connection=None)
    request = CallRequest(capabilities={"elicitation": {}})
    params = {"name": "ask_name", "arguments": {}}
    context, held = await peer_input(runtime, "alice", tool, params, request, channel, modern=False)
    assert held is None and context is not None and context.elicitation is not None
    asked = context.elicitation
    questions: list[asyncio.Task[dict[str, Any]]] = []
    sent: list[bytes] = []

    async def send(message: Any) -> None:
        sent.append(message.get("body", b""))

    async def receive() -> Any:
        await anyio.sleep_forever()

    async def asks_then_ends() -> dict[str, Any]:  # the upstream asks on a task of its own, then gives up
        questions.append(asyncio.get_running_loop().create_task(asked({"message": "name?"})))
        with anyio.fail_after(5):
            while not channel.queued and not any(sent):  # noqa: ASYNC110
                await asyncio.sleep(0)
        return {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}

    await stream_answer(send, receive, PeerCalls(), ("alice", None), 1, channel, asks_then_ends)
    assert b'"method":"elicitation/create"' in b"".join(sent)
    with anyio.fail_after(5), pytest.raises(MCPError, match="the tool call this request belongs to has ended"):
        await questions[0]  # at once, not after ASK_TIMEOUT_S (300 s)
    assert len(asks) == 0
