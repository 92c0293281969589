"""One upstream session per connection, counted at the upstream; the listing cache and list_changed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as mt
import pytest

from connections import ClientPool, ConnectionDefinition, define_connection
from tests.conftest import free_port
from tests.fixtures.upstreams.proctable import matching
from tests.processes import running

pytestmark = pytest.mark.anyio

UPSTREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams"
COUNTING = str(UPSTREAMS / "counting_server.py")


def text(result: mt.CallToolResult | dict[str, Any]) -> str:
    if isinstance(result, dict):  # the pool's JSON result
        result = mt.CallToolResult.model_validate(result)
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


def events(path: Path, *kinds: str) -> list[str]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if line.split()[0] in kinds]


def stdio(name: str, count: Path, **fields: Any) -> ConnectionDefinition:
    env = {"COUNT_FILE": str(count)}
    return define_connection(command=sys.executable, args=[COUNTING, "stdio"], env=env, **fields).named(name, None)


@pytest.fixture(scope="module")
def counting_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    port = free_port()
    count = tmp_path_factory.mktemp("count") / "count.txt"
    with running([sys.executable, COUNTING, "http", str(port)], port=port, env={"COUNT_FILE": str(count)}):
        yield f"http://127.0.0.1:{port}/mcp", count


async def hundred_calls(pool: ClientPool, name: str) -> list[str]:
    results: list[str] = []

    async def one(i: int) -> None:
        results.append(text(await pool.call_tool(name, "echo", {"text": str(i)})))

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(one, i)
    return results


async def test_100_concurrent_calls_on_a_fresh_stdio_connection_start_one_child(tmp_path: Path) -> None:
    count = tmp_path / "count.txt"
    async with ClientPool({"c": stdio("c", count)}) as pool:
        results = await hundred_calls(pool, "c")
        assert sorted(results, key=int) == [str(i) for i in range(100)]
        assert len(events(count, "start")) == 1
        assert pool.status("c").opens == 1
    assert not matching(f"{COUNTING} stdio")


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_100_concurrent_calls_on_a_fresh_http_connection_open_one_session(
    counting_http: tuple[str, Path], protocol: str
) -> None:
    url, count = counting_http
    before = len(events(count, "initialize", "server/discover"))
    async with ClientPool({"h": define_connection(url=url, protocol=protocol).named("h", None)}) as pool:
        results = await hundred_calls(pool, "h")
        assert len(results) == 100
        await pool.list_tools("h")
        opened = events(count, "initialize", "server/discover")[before:]
        # One handshake (legacy) or one discovery probe (2026-07-28) for all 100 calls and the listing.
        assert [line.split()[0] for line in opened] == ["server/discover" if protocol == "auto" else "initialize"]
        assert pool.status("h").protocol_version == ("2026-07-28" if protocol == "auto" else "2025-11-25")


async def _sees_the_added_tool(pool: ClientPool, name: str, tool: str, count: Path | None = None) -> None:
    listeners = len(events(count, "listening")) if count is not None else 0
    first = {t.name for t in await pool.list_tools(name, use_cache=True)}
    assert tool not in first
    if (
        count is not None
    ):  # over HTTP a change is announced on a listener stream: one announced before it is open is lost
        with anyio.fail_after(10):
            while len(events(count, "listening")) <= listeners:  # noqa: ASYNC110
                await anyio.sleep(0.01)
    # The cache answers while nothing changed (the hour-long TTL never runs out in this test)...
    assert {t.name for t in await pool.list_tools(name, use_cache=True)} == first
    # ...until the upstream says its tools changed (the add_tool tool itself announces it).
    await pool.call_tool(name, "add_tool", {"name": tool})
    with anyio.fail_after(10):
        while tool not in {t.name for t in await pool.list_tools(name, use_cache=True)}:  # noqa: ASYNC110
            await anyio.sleep(0.01)  # the announcement may land a moment after the call returns


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_list_changed_from_a_stdio_upstream_drops_the_cached_listing(tmp_path: Path, protocol: str) -> None:
    # legacy: `notifications/tools/list_changed` on the session; modern (2026-07-28): an event on the
    # `subscriptions/listen` stream the pool holds open for the session.
    defn = stdio("c", tmp_path / "count.txt", protocol=protocol)
    async with ClientPool({"c": defn}, listing_ttl=3600) as pool:
        await _sees_the_added_tool(pool, "c", "late_tool")


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_list_changed_from_an_http_upstream_drops_the_cached_listing(
    counting_http: tuple[str, Path], protocol: str
) -> None:
    url, count = counting_http
    defn = define_connection(url=url, protocol=protocol).named("h", None)
    async with ClientPool({"h": defn}, listing_ttl=3600) as pool:
        await _sees_the_added_tool(pool, "h", f"late_http_{protocol}", count)
        assert pool.status("h").protocol_version == ("2026-07-28" if protocol == "auto" else "2025-11-25")


async def test_a_zero_ttl_lists_every_time(tmp_path: Path) -> None:
    env = {"COUNT_FILE": str(tmp_path / "count.txt"), "SILENT_CHANGES": "1"}  # no announcement: only the TTL
    defn = define_connection(command=sys.executable, args=[COUNTING, "stdio"], env=env, protocol="modern")
    defn = defn.named("c", None)
    async with ClientPool({"c": defn}, listing_ttl=0) as pool:
        await pool.list_tools("c", use_cache=True)
        await pool.call_tool("c", "add_tool", {"name": "late_tool"})
        assert "late_tool" in {t.name for t in await pool.list_tools("c", use_cache=True)}


async def test_a_restarted_http_upstream_gets_a_new_session_and_the_call_succeeds(tmp_path: Path) -> None:
    port = free_port()
    count = tmp_path / "count.txt"
    cmd = [sys.executable, COUNTING, "http", str(port)]
    defn = define_connection(url=f"http://127.0.0.1:{port}/mcp", protocol="legacy").named("h", None)
    async with ClientPool({"h": defn}) as pool:
        with running(cmd, port=port, env={"COUNT_FILE": str(count)}):
            assert text(await pool.call_tool("h", "echo", {"text": "before"})) == "before"
        # The upstream restarts (a deploy): it no longer knows our Mcp-Session-Id and answers 404.
        with running(cmd, port=port, env={"COUNT_FILE": str(count)}):
            assert text(await pool.call_tool("h", "echo", {"text": "after"})) == "after"
        assert pool.status("h").opens == 2
        assert len(events(count, "initialize")) == 2
