"""The stdio wire against a real child (server-everything over stdio): one caller's unencodable
argument fails that call only, and a long answer line is read whole."""

from __future__ import annotations

import anyio
import mcp.types as mt
import pytest

from connections import ClientPool, ConnectionsError, define_connection
from tests.peers import node_bin

pytestmark = pytest.mark.anyio


def _everything() -> ClientPool:
    defn = define_connection(command=str(node_bin("mcp-server-everything")), args=["stdio"]).named("ev", None)
    return ClientPool({"ev": defn})


def _text(result: dict[str, object]) -> str:
    """The text of a pool result (one JSON result shape: a `CallToolResult` as a dict)."""
    content = mt.CallToolResult.model_validate(result).content
    return "".join(c.text for c in content if isinstance(c, mt.TextContent))


async def test_a_lone_surrogate_argument_fails_that_call_only_and_the_child_keeps_running() -> None:
    async with _everything() as pool:
        assert "warm" in _text(await pool.call_tool("ev", "echo", {"message": "warm"}))
        pid = pool.status("ev").pid
        assert pid is not None
        outcomes: dict[str, object] = {}

        async def innocent() -> None:
            # In flight on the same child while the bad call is written.
            slow = {"duration": 1, "steps": 2}
            outcomes["innocent"] = await pool.call_tool("ev", "trigger-long-running-operation", slow)

        async def bad() -> None:
            try:
                outcomes["bad"] = await pool.call_tool("ev", "echo", {"message": "\ud800"})
            except ConnectionsError as exc:
                outcomes["bad"] = exc

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(innocent)
                await anyio.sleep(0.2)
                tg.start_soon(bad)

        refused = outcomes["bad"]
        assert isinstance(refused, ConnectionsError), refused
        assert "cannot be encoded as JSON" in str(refused)
        innocent_result = outcomes["innocent"]
        assert isinstance(innocent_result, dict) and not innocent_result.get("isError"), innocent_result
        status = pool.status("ev")
        assert (status.pid, status.opens, status.state, status.failures) == (pid, 1, "open", 0)
        # Again and again: the restart limit is never reached, the connection never pauses.
        for _ in range(5):
            with pytest.raises(ConnectionsError):
                await pool.call_tool("ev", "echo", {"message": "x\udfffy"})
        assert "after" in _text(await pool.call_tool("ev", "echo", {"message": "after"}))
        assert (pool.status("ev").pid, pool.status("ev").opens) == (pid, 1)
