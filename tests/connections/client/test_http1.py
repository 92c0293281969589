"""The keep-alive HTTP/1.1 wire (`connections/client/_transports/_http1.py`) against scripted servers.

Each server here is a real asyncio TCP server on loopback whose script writes exact bytes: the
edge cases of HTTP/1.1 framing (RFC 9112 §6.3) that a reference MCP server never produces on
demand. Nothing of the wire is mocked; the tests watch what the server sees (connections opened,
connections closed) and what the caller gets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest

from connections.client._transports._http1 import MAX_HEAD_BYTES, Http1Origin
from tests.scripted import Peer, Scripted, ok, scripted

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def origin_for(server: Scripted) -> AsyncIterator[Http1Origin]:
    origin = Http1Origin(server.url, ssl_context=None, connect_timeout=5)
    try:
        yield origin
    finally:
        await origin.aclose()


async def post(origin: Http1Origin, body: bytes = b"{}") -> tuple[int, bytes]:
    with anyio.fail_after(10):
        response = await origin.request("POST", [("content-type", "application/json")], body)
        try:
            return response.status, await response.read()
        finally:
            response.release()


async def keep_answering(peer: Peer) -> None:
    while (body := await peer.request()) is not None:
        await peer.send(ok(b"conn %d: %s" % (peer.index, body)))


async def test_a_keep_alive_connection_serves_the_next_request() -> None:
    async with scripted(keep_answering) as server, origin_for(server) as origin:
        assert await post(origin, b"a") == (200, b"conn 1: a")
        assert await post(origin, b"b") == (200, b"conn 1: b")
        assert server.accepted == 1


async def test_connection_close_is_honoured_and_the_next_request_opens_a_new_connection() -> None:
    async def once_then_close(peer: Peer) -> None:
        body = await peer.request()
        await peer.send(ok(b"conn %d: %s" % (peer.index, body), "connection: close"))
        await peer.closed_by_client()

    async with scripted(once_then_close) as server, origin_for(server) as origin:
        assert await post(origin, b"a") == (200, b"conn 1: a")
        await server.until(lambda s: s.closed_by_client == 1)  # we closed our end: never reused
        assert await post(origin, b"b") == (200, b"conn 2: b")


async def test_a_body_without_length_ends_with_the_connection() -> None:
    async def until_close(peer: Peer) -> None:
        await peer.request()
        await peer.send(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
        await peer.send(b'{"part": 1, ')
        await peer.send(b'"part2": "conn %d"}' % peer.index)
        peer.writer.close()

    async with scripted(until_close) as server, origin_for(server) as origin:
        assert await post(origin) == (200, b'{"part": 1, "part2": "conn 1"}')
        assert await post(origin) == (200, b'{"part": 1, "part2": "conn 2"}')
        assert server.accepted == 2


async def test_a_204_has_no_body_and_keeps_the_connection() -> None:
    async def no_content(peer: Peer) -> None:
        while await peer.request() is not None:
            await peer.send(b"HTTP/1.1 204 No Content\r\n\r\n")

    async with scripted(no_content) as server, origin_for(server) as origin:
        assert await post(origin) == (204, b"")
        assert await post(origin) == (204, b"")
        assert server.accepted == 1


async def test_stray_bytes_after_a_response_never_reach_the_next_request() -> None:
    async def with_a_stray_answer(peer: Peer) -> None:
        body = await peer.request()
        if peer.index == 1:
            # The answer, and in the same write a second one that no request asked for.
            await peer.send(ok(b"real: " + (body or b"")) + ok(b"stray"))
            await peer.closed_by_client()
            return
        await keep_answering_from(peer, body)

    async def keep_answering_from(peer: Peer, first: bytes | None) -> None:
        body = first
        while body is not None:
            await peer.send(ok(b"conn %d: %s" % (peer.index, body)))
            body = await peer.request()

    async with scripted(with_a_stray_answer) as server, origin_for(server) as origin:
        assert await post(origin, b"a") == (200, b"real: a")
        assert await post(origin, b"b") == (200, b"conn 2: b")
        assert server.closed_by_client == 1


async def test_stray_bytes_on_an_idle_connection_retire_it() -> None:
    async def then_stray(peer: Peer) -> None:
        body = await peer.request()
        await peer.send(ok(b"conn %d: %s" % (peer.index, body)))
        if peer.index == 1:
            await peer.send(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstray")
            await peer.closed_by_client()
            return
        await keep_answering(peer)

    async with scripted(then_stray) as server, origin_for(server) as origin:
        assert await post(origin, b"a") == (200, b"conn 1: a")
        await server.until(lambda s: s.closed_by_client == 1)
        assert await post(origin, b"b") == (200, b"conn 2: b")


@pytest.mark.parametrize("announced", [False, True])
async def test_a_server_that_closes_idle_connections_at_its_keep_alive_timeout(announced: bool) -> None:
    # The server closes a connection once it has been idle for its keep-alive timeout. Whether or
    # not it announced the timeout (`Keep-Alive: timeout=N`), the next request must go out on a new
    # connection, never into the closed one (which would fail the call).
    closed = anyio.Event()

    async def idle_timeout(peer: Peer) -> None:
        body = await peer.request()
        extra = ("keep-alive: timeout=30",) if announced else ()
        await peer.send(ok(b"conn %d: %s" % (peer.index, body), *extra))
        if peer.index == 1:
            peer.writer.close()  # the timeout ran out
            await peer.writer.wait_closed()
            closed.set()
            return
        await keep_answering(peer)

    async with scripted(idle_timeout) as server, origin_for(server) as origin:
        assert await post(origin, b"a") == (200, b"conn 1: a")
        await closed.wait()
        # No sleep: the event loop may not have seen the close yet; the reuse check must.
        assert await post(origin, b"b") == (200, b"conn 2: b")
        assert server.accepted == 2


async def test_a_cancel_while_draining_frees_the_connection_and_its_slot() -> None:
    # Each answer sends its head and a first chunk, then stalls. A caller cancelled while the
    # rest drains must give back its slot (at most 100 connections at once) and close the socket.
    async def stalls(peer: Peer) -> None:
        body = await peer.request()
        if body == b"full":
            await peer.send(ok(b"done"))
            return
        await peer.send(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nfirst")
        await peer.closed_by_client()

    async with scripted(stalls) as server, origin_for(server) as origin:
        for _ in range(101):
            with anyio.fail_after(10):
                response = await origin.request("POST", [], b"stall")
            assert await response.next_chunk() == b"first"
            with anyio.CancelScope() as scope:
                scope.cancel()
                await response.finish(seconds=30, max_bytes=1 << 20)
        await server.until(lambda s: s.closed_by_client == 101)
        assert await post(origin, b"full") == (200, b"done")  # a slot is free: the 102nd request goes out


@pytest.mark.parametrize("shape", ["many headers", "one endless header"])
async def test_response_headers_are_capped(shape: str) -> None:
    async def huge_head(peer: Peer) -> None:
        while (body := await peer.request()) is not None:
            if body == b"small":
                # Just under the cap: accepted, as httpcore accepts it.
                filler = "".join(f"x-fill-{i}: {'v' * 90}\r\n" for i in range((MAX_HEAD_BYTES - 1024) // 104))
                await peer.send(f"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{filler}\r\nok".encode())
            elif shape == "many headers":
                filler = "".join(f"x-fill-{i}: {'v' * 90}\r\n" for i in range(MAX_HEAD_BYTES // 90))
                await peer.send(f"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{filler}\r\nok".encode())
            else:
                await peer.send(b"HTTP/1.1 200 OK\r\nx-endless: ")
                for _ in range(64):  # 4 MiB of one header value, never ended
                    await peer.send(b"v" * 65536)

    async with scripted(huge_head) as server, origin_for(server) as origin:
        assert await post(origin, b"small") == (200, b"ok")
        with pytest.raises(httpx2.RemoteProtocolError, match=f"headers are over the {MAX_HEAD_BYTES}-byte limit"):
            await post(origin, b"big")
        await server.until(lambda s: s.closed_by_client == 1)  # the connection that carried it is closed
