"""`ToolCatalog` against server-everything: how often a `tools/call` lists once the reused listing is past its ttl."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from connections import Broker, SessionInfo, Toolset, TurnBuilder, TurnProblem, load_project
from gateway.mcp.toolsets import ToolCatalog
from tests.conftest import free_port
from tests.peers import node_bin
from tests.processes import running

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


class CountingBuilder(TurnBuilder):
    """The broker's real builder, counting the listings (`collect`) the catalog asks it for."""

    collects: int = 0

    async def collect(
        self, session: SessionInfo | None, *, hold_back: bool = False, only: str | None = None
    ) -> tuple[Toolset, list[TurnProblem]]:
        type(self).collects += 1
        return await TurnBuilder.collect(self, session, hold_back=hold_back, only=only)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counting(builder: TurnBuilder) -> CountingBuilder:
    fields = ("project", "list_tools", "call_tool", "host", "start_wait", "starting", "observer", "pins")
    CountingBuilder.collects = 0
    return CountingBuilder(**{name: getattr(builder, name) for name in fields})


async def test_calls_past_the_ttl_list_once_per_ttl_not_once_per_call(tmp_path: Path, everything: str) -> None:
    source = f"""
        from connections import define_connection
        connection = define_connection(url={everything!r}, advertise_tools=True)
    """
    (tmp_path / "agent" / "mcp-connections").mkdir(parents=True)
    (tmp_path / "agent" / "mcp-connections" / "everything.py").write_text(textwrap.dedent(source))
    async with Broker(load_project(tmp_path)) as broker:
        clock = Clock()
        catalog = ToolCatalog(counting(broker.builder), ttl=30.0, clock=clock)
        await catalog.live()  # the full listing a peer's tools/list made
        CountingBuilder.collects = 0
        clock.now += 31.0  # the peer stays open past the ttl

        for _ in range(20):  # sequential calls
            tool, _, problems = await catalog.tool("echo")
            assert tool is not None and tool.connection == "everything" and problems == []
        assert CountingBuilder.collects == 1, "one listing of the tool's connection, then reused within the ttl"

        clock.now += 31.0
        found: list[str] = []

        async def call() -> None:
            tool, _, _ = await catalog.tool("echo")
            assert tool is not None
            found.append(tool.name)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(16):  # 16 peers at once wait for one listing, not 16 in turn
                    tg.start_soon(call)
        assert found == ["echo"] * 16
        assert CountingBuilder.collects == 2

        tool, _, _ = await catalog.tool("echo")  # still within the ttl of that listing
        assert tool is not None and CountingBuilder.collects == 2
