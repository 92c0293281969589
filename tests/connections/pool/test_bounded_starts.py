"""Stdio children start in bounded batches: at most the start limit at once, each timed from its own start.

The upstream is our counting server run as real child processes through the SDK's stdio client;
with `START_SECONDS` its start takes that long and it logs, under a file lock, how many servers
are starting at that moment.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from connections import (
    Broker,
    ClientPool,
    ConnectionDefinition,
    ConnectionsError,
    Timeouts,
    TurnBuildError,
    define_connection,
)
from connections.project._loader import Project
from tests.connections.pool.test_pool_faults import eventually
from tests.fixtures.upstreams.proctable import matching

pytestmark = pytest.mark.anyio

COUNTING = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "counting_server.py")


def slow_starter(name: str, tmp: Path, seconds: float, **fields: Any) -> ConnectionDefinition:
    env = {
        "COUNT_FILE": str(tmp / "count.txt"),
        "STARTING_FILE": str(tmp / "starting.txt"),
        "START_SECONDS": str(seconds),
    }
    return define_connection(command=sys.executable, args=[COUNTING, "stdio"], env=env, **fields).named(name, None)


def most_starting_at_once(tmp: Path) -> int:
    return max(int(line.split()[1]) for line in (tmp / "starting.txt").read_text().splitlines())


def starts(tmp: Path) -> int:
    count = tmp / "count.txt"
    lines = count.read_text().splitlines() if count.exists() else []
    return sum(1 for line in lines if line.startswith("start "))


async def list_all(pool: ClientPool, names: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}

    async def one(name: str) -> None:
        found[name] = len(await pool.list_tools(name))

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(one, name)
    return found


async def test_no_more_children_than_the_start_limit_start_at_once(tmp_path: Path) -> None:
    defns = {f"s{i}": slow_starter(f"s{i}", tmp_path, 0.4) for i in range(6)}
    async with ClientPool(defns, start_limit=2) as pool:
        found = await list_all(pool, list(defns))
        assert set(found) == set(defns) and all(n > 0 for n in found.values())
        assert most_starting_at_once(tmp_path) == 2  # bounded, and the bound is used
        assert starts(tmp_path) == 6
        assert all(pool.status(name).opens == 1 for name in defns)
    assert not matching(f"{COUNTING} stdio")


async def test_each_connect_timeout_counts_from_the_childs_own_start(tmp_path: Path) -> None:
    # Three starts of 1.5 s one at a time take over 4.5 s: longer than any one child's 4 s connect timeout.
    timeouts = Timeouts(connect=4)
    defns = {f"s{i}": slow_starter(f"s{i}", tmp_path, 1.5, timeouts=timeouts) for i in range(3)}
    async with ClientPool(defns, start_limit=1) as pool:
        found = await list_all(pool, list(defns))
        assert set(found) == set(defns)
        assert most_starting_at_once(tmp_path) == 1
        assert starts(tmp_path) == 3


async def test_a_queued_child_is_reported_as_queued(tmp_path: Path) -> None:
    defns = {f"s{i}": slow_starter(f"s{i}", tmp_path, 1.0) for i in range(2)}
    async with ClientPool(defns, start_limit=1) as pool:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.list_tools, "s0")
            await eventually(lambda: pool.status("s0").state == "opening")
            tg.start_soon(pool.list_tools, "s1")
            await eventually(lambda: pool.status("s1").state != "idle")
            assert pool.status("s1").state == "queued"
        assert pool.status("s0").state == pool.status("s1").state == "open"


async def test_a_build_reports_children_still_starting_and_the_next_build_does_not_restart_them(
    tmp_path: Path,
) -> None:
    # Five starts of 1.2 s one at a time outlast the build's bound (start_wait, at least each
    # connection's own connect + list + 1 = 6 s): the first build names the ones still starting.
    timeouts = Timeouts(connect=4, list=1)
    tools = ["echo", "pid", "slow", "hang", "env"]  # one each: advertised names must not collide
    defns = {
        f"s{i}": slow_starter(f"s{i}", tmp_path, 1.2, advertise_tools=True, timeouts=timeouts, allow_tools=[tool])
        for i, tool in enumerate(tools)
    }
    async with Broker(Project(root=tmp_path, connections=defns), start_limit=1) as broker:
        builder = broker.builder
        builder.start_wait = 0.1
        with pytest.raises(TurnBuildError) as first:
            await builder.build(None)
        starting = {p.connection for p in first.value.problems if p.code == "connection_starting"}
        assert starting and {p.code for p in first.value.problems} == {"connection_starting"}
        assert "still starting" in str(first.value)
        # The children that came up stay up; the rest keep starting and a later build gets them all.
        assert any(broker.pool.status(name).state == "open" for name in defns)
        toolset = None
        with anyio.fail_after(30):
            while toolset is None:
                try:
                    toolset = await builder.build(None)
                except TurnBuildError as exc:
                    assert {p.code for p in exc.problems} == {"connection_starting"}
        assert sorted(toolset.tools) == sorted(tools)
        assert starts(tmp_path) == 5  # every child started once: no stop-all-and-retry
        assert all(broker.pool.status(name).opens == 1 for name in defns)


async def test_warm_starts_every_connection_before_the_first_use(tmp_path: Path) -> None:
    defns = {f"s{i}": slow_starter(f"s{i}", tmp_path, 0.1) for i in range(3)}
    async with ClientPool(defns, start_limit=2) as pool:
        pool.warm()
        await eventually(lambda: all(pool.status(name).state == "open" for name in defns))
        assert starts(tmp_path) == 3
        await list_all(pool, list(defns))
        assert all(pool.status(name).opens == 1 for name in defns)


async def test_closing_the_pool_stops_the_queue_and_starts_no_queued_child(tmp_path: Path) -> None:
    defns = {f"s{i}": slow_starter(f"s{i}", tmp_path, 1.0) for i in range(3)}
    outcomes: dict[str, BaseException | None] = {}
    pool = ClientPool(defns, start_limit=1)

    async def use(name: str) -> None:
        try:
            await pool.list_tools(name)
            outcomes[name] = None
        except ConnectionsError as exc:
            outcomes[name] = exc

    async with anyio.create_task_group() as tg:
        async with pool:
            for name in defns:
                tg.start_soon(use, name)
            await eventually(lambda: sum(pool.status(n).state == "queued" for n in defns) == 2)
        # Leaving the block closed the pool with one child starting and two queued.
    queued = [exc for exc in outcomes.values() if exc is not None and "closing" in str(exc)]
    assert len(queued) >= 2  # the queued ones end with a sentence, not a hang
    assert starts(tmp_path) <= 1  # and were never started (the one starting may not have got as far as its log)
    assert not matching(f"{COUNTING} stdio")
