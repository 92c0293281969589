"""Pooled Streamable HTTP clients reuse their TCP connection even when the upstream answers with SSE."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connections import ClientPool, define_connection
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import running

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


async def test_sequential_calls_share_one_upstream_connection(everything: tuple[str, int]) -> None:
    url, port = everything
    defn = define_connection(url=url).named("everything", None)
    async with ClientPool({"everything": defn}) as pool:
        await pool.call_tool("everything", "echo", {"message": "warm"})
        before = sockets_on(port)
        for i in range(60):
            result = await pool.call_tool("everything", "echo", {"message": f"n{i}"})
            assert not result.is_error
        grown = sockets_on(port) - before
    # Without draining the SSE answer, each call left a closed connection behind (60 more sockets).
    assert grown <= 4, f"{grown} new sockets for 60 calls"
