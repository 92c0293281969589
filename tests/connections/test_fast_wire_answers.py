"""Answers only a scripted upstream gives on demand, on both wires (`connections/_fast_calls.py` and the SDK's).

The upstream is `tests/scripted.py`'s handshake-era endpoint: a real TCP server that answers
`initialize` and `tools/list` as an MCP server does and writes the exact bytes under test for
`tools/call`. Each case must give the caller the same outcome on the fast wire as on the SDK's
Streamable HTTP transport, and must not cost the pool a new session.
"""

from __future__ import annotations

from typing import Any

import pytest

from connections import ClientPool, ConnectionsError, define_connection
from tests.scripted import Peer, handshake_server, scripted

pytestmark = pytest.mark.anyio

LEGS = ("fast", "sdk")


async def outcomes(url: str, leg: str, calls: int = 2) -> tuple[list[Any], int, bool]:
    """What `calls` calls of `echo` give (result or typed error), the sessions opened, and whether the fast wire
    served them."""
    defn = define_connection(url=url, protocol="legacy").named("scripted", None)
    seen: list[Any] = []
    async with ClientPool({"scripted": defn}, fast_calls=leg == "fast") as pool:
        for _ in range(calls):
            try:
                result = await pool.call_tool("scripted", "echo", {})
                seen.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            except ConnectionsError as exc:
                seen.append((type(exc).__name__, str(exc)))
        status = pool.status("scripted")
        return seen, status.opens, status.fast_calls


async def test_a_404_from_a_server_without_sessions_is_not_a_lost_session() -> None:
    # The server gave no Mcp-Session-Id, so there is no session to lose: as the SDK transport says, a
    # 404 is HTTP's "no such method" here. The pool must not open a new session and send it again.
    posts: list[int] = []

    async def not_found(peer: Peer, message: dict[str, Any]) -> None:
        posts.append(1)
        await peer.send(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")

    seen: dict[str, Any] = {}
    for leg in LEGS:
        posts.clear()
        async with scripted(handshake_server(not_found)) as server:
            errors, opens, fast = await outcomes(server.url, leg)
        seen[leg] = errors
        assert (opens, fast, len(posts)) == (1, leg == "fast", 2), leg  # one call, one POST each
    assert seen["fast"] == seen["sdk"]
    assert seen["fast"][0] == (
        "UpstreamError",
        "connection 'scripted': tools/call 'echo' failed: upstream error -32601: Not Found",
    )
