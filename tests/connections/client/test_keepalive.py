"""Pooled Streamable HTTP clients reuse their TCP connection even when the upstream answers with SSE."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from connections import ClientPool, ConnectionUnavailable, define_connection
from connections.client._keepalive import DrainingTransport, _DrainOnClose  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import recording_server, running

pytestmark = pytest.mark.anyio


def sockets_on(port: int) -> int:
    """TCP sockets (any state, TIME_WAIT included) with `port` at either end, from /proc/net/tcp."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.rsplit(":", 1)[1], 16) == port or int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


@pytest.fixture(scope="module")
def everything() -> Iterator[tuple[str, int]]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp", port


@pytest.mark.parametrize("fast", ["1", "0"], ids=["fast-leg", "sdk-transport"])
async def test_sequential_calls_share_one_upstream_connection(everything: tuple[str, int], fast: str) -> None:
    url, port = everything
    defn = define_connection(url=url).named("everything", None)
    # Both wires keep the connection: the fast leg (connections/client/_transports/_http1.py) and the SDK's transport.
    async with ClientPool({"everything": defn}, fast_calls=fast == "1") as pool:
        assert pool.status("everything").fast_calls is False  # not open yet
        await pool.call_tool("everything", "echo", {"message": "warm"})
        assert pool.status("everything").fast_calls is (fast == "1")
        before = sockets_on(port)
        for i in range(60):
            result = await pool.call_tool("everything", "echo", {"message": f"n{i}"})
            assert not result.get("isError")
        grown = sockets_on(port) - before
    # Without draining the SSE answer, each call left a closed connection behind (60 more sockets).
    assert grown <= 4, f"{grown} new sockets for 60 calls"


@pytest.fixture(scope="module")
def json_upstream() -> Iterator[str]:
    port = free_port()
    with running(recording_server(port), port=port):
        yield f"http://127.0.0.1:{port}/mcp"


async def test_json_answers_are_closed_as_they_are(json_upstream: str) -> None:
    """Only an SSE answer is drained on close; a JSON body was read whole and must not wait for more."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    async with httpx2.AsyncClient(transport=DrainingTransport(httpx2.AsyncHTTPTransport())) as http:
        async with http.stream("POST", json_upstream, json=body, headers=headers) as response:
            assert response.headers["content-type"].startswith("application/json")
            assert not isinstance(response.stream, _DrainOnClose)
            await response.aread()


_SERVER_KEEPALIVE_S = 4.5
"""The proxy below plays a server whose keep-alive timer is this long (uvicorn's is 5 s)."""


@asynccontextmanager
async def closing_at_keepalive(upstream_port: int, keepalive_s: float = _SERVER_KEEPALIVE_S) -> AsyncGenerator[int]:
    """A TCP proxy to `upstream_port` that acts out the race of a server's keep-alive timeout: a request
    that arrives on a connection idle for `keepalive_s` or more is met with a close, unanswered
    (the server closed it as the request was on its way). Yields the proxy's port."""

    async def pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: list[float], inbound: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                now = time.monotonic()
                if inbound and len(seen) > 1 and now - seen[-1] >= keepalive_s:
                    break  # the request reached a connection the server had just let go
                seen.append(now)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)
        seen: list[float] = [time.monotonic()]
        await asyncio.gather(pipe(client_r, up_w, seen, True), pipe(up_r, client_w, seen, False))
        client_w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_connection_idle_near_the_servers_keepalive_timeout_is_not_reused(
    everything: tuple[str, int],
) -> None:
    """A POST sent on a kept-alive connection the server closes at that moment fails unanswered, and the
    SDK's transport then ends the whole session ("the connection closed"): an idle connection is given up
    a second before a server's usual 5-s timeout, on the SDK transport as on the fast leg."""
    _, port = everything
    async with closing_at_keepalive(port) as proxy:
        defn = define_connection(url=f"http://127.0.0.1:{proxy}/mcp").named("everything", None)
        async with ClientPool({"everything": defn}, fast_calls=False) as pool:
            await pool.call_tool("everything", "echo", {"message": "first"})
            await anyio.sleep(_SERVER_KEEPALIVE_S + 0.2)
            result = await pool.call_tool("everything", "echo", {"message": "after the pause"})
            assert not result.get("isError")
            assert pool.status("everything").opens == 1  # the same session: it did not end under the call


async def test_a_listing_whose_session_ended_under_it_is_asked_again_on_a_new_session_and_a_call_is_not(
    everything: tuple[str, int],
) -> None:
    """A server whose keep-alive is shorter than the gateway's reuse bound (3 s here) still closes a connection
    as a request reaches it, and the SDK transport's session ends. A listing only reads: it is sent once more
    on a new session and answers. A call may have run upstream: it fails, naming what happened."""
    _, port = everything
    async with closing_at_keepalive(port, keepalive_s=3.0) as proxy:
        defn = define_connection(url=f"http://127.0.0.1:{proxy}/mcp").named("everything", None)
        async with ClientPool({"everything": defn}, fast_calls=False) as pool:
            first = await pool.list_tools("everything", use_cache=False)
            await anyio.sleep(3.2)
            again = await pool.list_tools("everything", use_cache=False)
            assert [t.name for t in again] == [t.name for t in first]
            assert pool.status("everything").opens == 2  # the session that ended, and the one that answered
            await anyio.sleep(3.2)
            with pytest.raises(ConnectionUnavailable, match="tools/call 'echo' failed: the connection closed"):
                await pool.call_tool("everything", "echo", {"message": "after the pause"})
