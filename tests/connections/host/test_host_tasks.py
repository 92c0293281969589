"""`host.mcp.call_tool(..., task=True)`: a tool task on server-everything over stdio, through its handle."""

from __future__ import annotations

import anyio
import mcp.types as mt
import pytest

from connections import ClientPool, HostMcp, ToolTask, define_connection
from tests.peers import node_bin

pytestmark = pytest.mark.anyio

RESEARCH = "simulate-research-query"


def _everything() -> ClientPool:
    defn = define_connection(command=str(node_bin("mcp-server-everything")), args=["stdio"]).named("everything", None)
    return ClientPool({"everything": defn})


async def test_a_task_handle_reports_status_and_result() -> None:
    async with _everything() as pool:
        host = HostMcp(pool)
        handle = await host.call_tool("everything", RESEARCH, {"topic": "handles"}, task=True, ttl_ms=60_000)
        assert isinstance(handle, ToolTask)
        assert handle.connection == "everything" and handle.task.status == "working"
        status = await handle.status()
        assert status.task_id == handle.task_id and status.status in ("working", "completed")
        result = await handle.result()  # waits for the four stages
        assert not result.is_error
        assert isinstance(result.content[0], mt.TextContent) and "# Research Report: handles" in result.content[0].text
        assert (await handle.status()).status == "completed"


async def test_a_task_handle_cancels() -> None:
    async with _everything() as pool:
        handle = await HostMcp(pool).call_tool("everything", RESEARCH, {"topic": "stop"}, task=True)
        assert isinstance(handle, ToolTask)
        assert (await handle.cancel()).status == "cancelled"
        await anyio.sleep(0.1)
        assert (await handle.status()).status == "cancelled"


async def test_without_task_the_required_task_tool_answers_the_upstreams_error_result() -> None:
    async with _everything() as pool:
        result = await HostMcp(pool).call_tool("everything", RESEARCH, {"topic": "inline"})
        assert result.is_error
        assert isinstance(result.content[0], mt.TextContent) and "requires task augmentation" in result.content[0].text


async def test_a_task_request_other_than_the_four_is_refused_before_the_upstream() -> None:
    async with _everything() as pool:
        with pytest.raises(ValueError, match="not a task request"):
            await HostMcp(pool).task_request("everything", "tools/list", {})
        assert pool.status("everything").state == "idle"  # nothing was opened for it
