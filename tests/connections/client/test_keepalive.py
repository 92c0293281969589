"""Pooled Streamable HTTP clients reuse their TCP connection even when the upstream answers with SSE."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from connections import ClientPool, define_connection
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
