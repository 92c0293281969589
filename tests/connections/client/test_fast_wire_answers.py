"""Answers only a scripted upstream gives on demand, on both wires (`connections/client/_fast_calls.py` and the SDK's).

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


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (404, "tools/call 'echo' failed: upstream error -32601: Not Found"),
        (400, "tools/call 'echo' failed: http://127.0.0.1:PORT/mcp answered HTTP 400"),
    ],
)
async def test_a_refusal_from_a_server_without_sessions_is_not_a_lost_session(status: int, says: str) -> None:
    # The server gave no Mcp-Session-Id, so there is no session to lose: as the SDK transport says, a
    # 404 is HTTP's "no such method" here, and a 400 a refusal. The pool must not open a new session
    # and send the call again.
    posts: list[int] = []

    async def refuse(peer: Peer, message: dict[str, Any]) -> None:
        posts.append(1)
        await peer.send(b"HTTP/1.1 %d Refused\r\ncontent-length: 0\r\n\r\n" % status)

    seen: dict[str, Any] = {}
    for leg in LEGS:
        posts.clear()
        async with scripted(handshake_server(refuse)) as server:
            errors, opens, fast = await outcomes(server.url, leg)
            port = server.port
        seen[leg] = errors
        assert (opens, fast, len(posts)) == (1, leg == "fast", 2), leg  # one call, one POST each
        assert errors[0] == ("UpstreamError", f"connection 'scripted': {says}".replace("PORT", str(port)))
    assert [e[0] for e in seen["fast"]] == [e[0] for e in seen["sdk"]]


async def test_a_redirect_the_sdk_will_not_follow_switches_the_fast_wire_off_after_one() -> None:
    # A 307 to another origin: the fast wire hands the call to the SDK transport (which refuses to
    # follow it off the origin) and switches itself off, so later calls cost one request, not two.
    redirects: list[int] = []

    async def elsewhere(peer: Peer, message: dict[str, Any]) -> None:
        redirects.append(1)
        await peer.send(b"HTTP/1.1 307 Moved\r\nlocation: http://127.0.0.2:9/mcp\r\ncontent-length: 0\r\n\r\n")

    seen: dict[str, Any] = {}
    for leg in LEGS:
        redirects.clear()
        async with scripted(handshake_server(elsewhere)) as server:
            errors, opens, fast = await outcomes(server.url, leg, calls=3)
        seen[leg] = errors
        assert (opens, fast) == (1, False), leg
        assert len(redirects) == (4 if leg == "fast" else 3), leg  # the fast wire's one, then one per call
    assert seen["fast"] == seen["sdk"]
    assert (
        seen["fast"][0][0] == "UpstreamError"
        and "Redirect to http://127.0.0.2:9/mcp not followed" in seen["fast"][0][1]
    )
