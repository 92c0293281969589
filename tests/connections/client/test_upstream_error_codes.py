"""An upstream's own JSON-RPC error -32000 or -32001 is that upstream's answer, not a dead transport or a timeout.

The SDK uses the same two codes for what it makes itself (-32000 "Connection closed" when the
transport ends, -32001 when a request's own timeout passes). A tool that answers with them (an
`mcp` 2.x tool raising `MCPError(-32000, "record not found")`) must reach its caller as that
error, leave the shared child and every other call in flight on it alone, and never count
toward the crash-loop pause: on stdio and on both HTTP wires, at both protocol generations.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from connections import ClientPool, ConnectionUnavailable, RestartPolicy, UpstreamError, define_connection
from tests.conftest import free_port
from tests.processes import running

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "erring_server.py")
POLICY = RestartPolicy(backoff_initial=0.01, backoff_max=0.05, crash_loop_failures=3, crash_loop_pause=600)
WIRES = ("stdio", "http-fast", "http-sdk")


@pytest.fixture(scope="module")
def erring_url() -> Iterator[str]:
    port = free_port()
    with running([sys.executable, SERVER, "--port", str(port)], port=port):
        yield f"http://127.0.0.1:{port}/mcp"


def _pool(wire: str, protocol: str, url: str) -> ClientPool:
    if wire == "stdio":
        defn = define_connection(command=sys.executable, args=[SERVER, "--stdio"], protocol=protocol)
    else:
        defn = define_connection(url=url, protocol=protocol)
    return ClientPool({"up": defn.named("up", None)}, restart_policy=POLICY, fast_calls=wire == "http-fast")


def _text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
@pytest.mark.parametrize("wire", WIRES)
async def test_an_upstreams_own_32000_and_32001_are_its_errors_and_other_calls_in_flight_are_served(
    erring_url: str, wire: str, protocol: str
) -> None:
    async with _pool(wire, protocol, erring_url) as pool:
        await pool.call_tool("up", "echo", {"text": "open"})
        held: list[dict[str, Any]] = []

        async def other_caller() -> None:
            held.append(await pool.call_tool("up", "hold", {}))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(other_caller)  # another caller's call, in flight on the same child/session
                # More than the crash-loop count: none of them may count toward a pause.
                for _ in range(POLICY.crash_loop_failures + 1):
                    with pytest.raises(UpstreamError) as caught:
                        await pool.call_tool("up", "refuse", {"code": -32000, "message": "record not found"})
                    assert (caught.value.rpc_code, caught.value.rpc_message) == (-32000, "record not found")
                    assert "upstream error -32000: record not found" in str(caught.value)
                    assert "cut off" not in str(caught.value)
                with pytest.raises(UpstreamError) as caught:
                    await pool.call_tool("up", "refuse", {"code": -32001, "message": "the ledger is busy"})
                assert (caught.value.rpc_code, caught.value.rpc_message) == (-32001, "the ledger is busy")
                released = await pool.call_tool("up", "release", {})
        # The held call reached the server before the refusals and was answered after them: same child.
        assert _text(released) == "released 1"
        assert [_text(r) for r in held] == ["held, then answered"]
        status = pool.status("up")
        assert (status.state, status.failures, status.opens) == ("open", 0, 1)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_a_stdio_child_that_really_exits_under_a_call_is_still_a_closed_connection(protocol: str) -> None:
    # The other side of the line: the SDK's own -32000 (the child's stdout ended) stays the connection's failure.
    async with _pool("stdio", protocol, "") as pool:
        await pool.call_tool("up", "echo", {"text": "open"})
        with pytest.raises(ConnectionUnavailable, match=r"the server process exited with code 3"):
            await pool.call_tool("up", "exit", {})
        assert pool.status("up").failures == 1
        assert _text(await pool.call_tool("up", "echo", {"text": "again"})) == "Echo: again"
        assert pool.status("up").opens == 2
