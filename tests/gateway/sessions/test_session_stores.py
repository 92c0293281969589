"""The two session stores behind one protocol, run against the same contract: files, and a real Redis.

Pagination by a per-principal index (cursor round trip, newest first, another principal's sessions
never in a page), the continuation token's compare-and-set, and turn leases: one turn at a time,
writes fenced by the lease holder, a lapsed lease closed once. Redis only: a store that cannot
reach Redis answers `StateUnavailable`, and works again when Redis is back, with the same client.
On both, a follow-up's runner gets the conversation from the last `HISTORY_EVENTS` events only.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from connections import Project, SessionInfo, Toolset, TurnBuilder
from gateway.cli import build_parser
from gateway.commands.serve import settings_from_args
from gateway.errors import CliError, StateUnavailable
from gateway.runners import FinalText
from gateway.sessions import FileSessionStore, RedisSessionStore, SessionRecord, SessionService, SessionStore
from gateway.sessions._records import closing_events, interrupted_outcome, new_event
from gateway.sessions._service import HISTORY_EVENTS
from gateway.settings import ServeSettings
from tests.conftest import free_port

from ..replicas import RedisServer, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["file", "redis"])
def unopened(request: pytest.FixtureRequest, tmp_path: Path, redis: RedisServer) -> SessionStore:
    """A fresh store of each kind, not yet opened (`SessionService.running` opens its own)."""
    if request.param == "file":
        return FileSessionStore(tmp_path)
    return RedisSessionStore(redis.url, prefix=f"t{secrets.token_hex(4)}:", patience_s=1.0)


@pytest.fixture
async def store(unopened: SessionStore) -> AsyncIterator[SessionStore]:
    made = unopened
    await made.open()
    try:
        yield made
    finally:
        await made.aclose()


def _record(owner: str, ms: int) -> SessionRecord:
    created = f"2026-12-01T00:00:{ms // 1000:02d}.{ms % 1000:03d}Z"
    return SessionRecord(
        id=f"ses_{secrets.token_hex(12)}",
        owner=owner,
        continuation_token=f"http:{secrets.token_hex(8)}",
        created_at=created,
    )


async def test_listing_pages_newest_first_by_cursor_and_shows_only_the_principals_own(store: SessionStore) -> None:
    mine = [_record("alice", 1000 + i) for i in range(7)]
    theirs = [_record("bob", 1003), _record("bob", 1010)]
    for r in [*mine, *theirs]:
        await store.create(r)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = await store.page("alice", cursor, 3)
        pages += 1
        seen += [r.id for r in page]
        assert all(r.owner == "alice" for r in page)
        if cursor is None:
            break
    assert seen == [r.id for r in reversed(mine)]
    assert pages == 3
    assert [r.id for r in (await store.page("bob", None, 10))[0]] == [theirs[1].id, theirs[0].id]
    assert await store.page("carol", None, 10) == ([], None)


async def test_a_token_rotates_only_from_the_current_one(store: SessionStore) -> None:
    record = _record("alice", 1)
    await store.create(record)
    old = record.continuation_token
    assert await store.find_token(old) == (record.id, True)
    assert not await store.rotate(record.id, "http:not-the-token", "http:new1")
    assert await store.rotate(record.id, old, "http:new1")
    assert not await store.rotate(record.id, old, "http:new2")  # a second follow-up with the same token loses
    assert await store.find_token(old) == (record.id, False)
    assert await store.find_token("http:new1") == (record.id, True)
    assert await store.find_token("http:unknown") is None
    loaded = await store.load(record.id)
    assert loaded is not None and loaded.continuation_token == "http:new1"


async def test_one_turn_at_a_time_and_writes_are_fenced_by_the_lease(store: SessionStore) -> None:
    record = _record("alice", 1)
    sid = record.id
    await store.create(record)
    await store.append(sid, [new_event(sid, "session.started", {})])
    assert await store.begin_turn(sid, "turn_a", "r1:turn_a", 30, [new_event(sid, "message.received", {}, "turn_a")])
    assert not await store.begin_turn(sid, "turn_b", "r2:turn_b", 30, [])
    loaded = await store.load(sid)
    assert loaded is not None and loaded.turn == "turn_a" and loaded.event_count == 2
    assert await store.append(sid, [new_event(sid, "turn.started", {}, "turn_a")], "r1:turn_a")
    if store.shared:  # one process owns every turn of a file store: there is no other holder
        assert not await store.append(sid, [new_event(sid, "turn.started", {}, "turn_b")], "r2:turn_b")
        assert not await store.end_turn(sid, "r2:turn_b", {"turnId": "turn_b"}, [])
    outcome = {"status": "completed", "reply": "x"}
    assert await store.end_turn(
        sid, "r1:turn_a", {"turnId": "turn_a", **outcome}, closing_events(sid, "turn_a", outcome)
    )
    events = await store.read(sid, 0)
    assert [e["index"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "session.started",
        "message.received",
        "turn.started",
        "turn.completed",
        "session.waiting",
    ]
    assert await store.read(sid, 2) == events[2:]
    assert await store.read(sid, 1, limit=2) == events[1:3]
    loaded = await store.load(sid)
    assert loaded is not None and loaded.turn is None and loaded.last_turn == {"turnId": "turn_a", **outcome}
    assert await store.begin_turn(sid, "turn_b", "r2:turn_b", 30, [])


async def test_a_blocked_read_wakes_on_an_append(store: SessionStore) -> None:
    record = _record("alice", 1)
    await store.create(record)
    got: list[list[dict[str, object]]] = []

    async def reader() -> None:
        got.append(await store.read(record.id, 0, block_s=5))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await anyio.sleep(0.2)
            await store.append(record.id, [new_event(record.id, "session.started", {})])
    assert [e["type"] for e in got[0]] == ["session.started"]


async def test_a_lapsed_lease_is_closed_once_and_its_holder_can_no_longer_write(redis: RedisServer) -> None:
    async with _redis_store(redis) as store:
        record = _record("alice", 1)
        sid = record.id
        await store.create(record)
        assert await store.begin_turn(sid, "turn_a", "dead:turn_a", 1.0, [new_event(sid, "message.received", {})])
        assert await store.lapsed() == []
        await anyio.sleep(1.0)  # the lease's own length: nothing to wait on but Redis's clock
        for _ in range(50):
            if await store.lapsed():
                break
            await anyio.sleep(0.1)
        assert await store.lapsed() == [(sid, "turn_a")]
        outcome = interrupted_outcome("owner_lost")
        last = {"turnId": "turn_a", **outcome}
        closing = closing_events(sid, "turn_a", outcome)
        results = [await store.reap(sid, "turn_a", last, closing) for _ in range(3)]
        assert results == [True, False, False]
        assert not await store.append(sid, [new_event(sid, "message.appended", {}, "turn_a")], "dead:turn_a")
        assert not await store.renew(sid, "dead:turn_a", 1.0)
        types = [e["type"] for e in await store.read(sid, 0)]
        assert types == ["message.received", "turn.failed", "session.waiting"]
        assert await store.lapsed() == []


async def test_redis_down_is_state_unavailable_and_the_same_store_works_when_it_returns(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)
    server.start()
    try:
        async with _redis_store(server) as store:
            record = _record("alice", 1)
            await store.create(record)
            server.kill()
            with pytest.raises(StateUnavailable) as caught:
                await store.load(record.id)
            assert "unavailable" in str(caught.value) and "retry" in str(caught.value)
            server.start()
            loaded = await store.load(record.id)
            assert loaded is not None and loaded.id == record.id  # acknowledged before the kill: still there
    finally:
        server.stop()


async def test_connections_idle_across_a_redis_restart_are_reopened_not_failed(tmp_path: Path) -> None:
    """The pool's connections that sat idle while Redis restarted are dead; the first request on each is
    retried on a new connection (the client's one retry), so no request made after Redis is back fails."""
    with redis_server(tmp_path) as server:
        async with _redis_store(server) as store:
            record = _record("alice", 1)
            await store.create(record)
            for _ in range(3):  # many requests at once: the pool holds that many connections, then idles
                with anyio.fail_after(10):
                    await _at_once(40, lambda: store.load(record.id))
                server.kill()
                server.start()
                with anyio.fail_after(10):
                    found = await _at_once(40, lambda: store.load(record.id))
                assert all(loaded is not None and loaded.id == record.id for loaded in found)


def test_a_request_on_a_connection_whose_socket_closed_under_it_is_sent_again_under_uvloop(tmp_path: Path) -> None:
    """Under uvloop (what `serve` runs on), a write on a transport that is already closed raises `RuntimeError`,
    not the `OSError` redis-py turns into its `ConnectionError`: it escaped the stores' error handling (an event
    stream died with a traceback in a Redis restart). The store's client makes it a `ConnectionError`: the
    client's one retry sends the request again on a new connection and it succeeds."""

    async def run() -> None:
        async with _redis_store(server) as store:
            record = _record("alice", 1)
            await store.create(record)
            await _at_once(8, lambda: store.load(record.id))  # several pooled connections, now idle
            pool = store._client.connection_pool  # pyright: ignore[reportPrivateUsage]
            idle = list(pool._available_connections)  # pyright: ignore[reportPrivateUsage]
            assert idle
            for connection in idle:
                connection._writer.transport.abort()  # the socket is gone; the connection does not know yet
            await anyio.sleep(0.05)
            with anyio.fail_after(10):
                found = await _at_once(8, lambda: store.load(record.id))
            assert all(loaded is not None and loaded.id == record.id for loaded in found)

    with redis_server(tmp_path) as server:
        anyio.run(run, backend="asyncio", backend_options={"use_uvloop": True})


async def _at_once(n: int, op: Any) -> list[Any]:
    found: list[Any] = []

    async def one() -> None:
        found.append(await op())

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    return found


class _redis_store:
    def __init__(self, server: RedisServer) -> None:
        self.store = RedisSessionStore(server.url, prefix=f"t{secrets.token_hex(4)}:", patience_s=1.0)

    async def __aenter__(self) -> RedisSessionStore:
        await self.store.open()
        return self.store

    async def __aexit__(self, *exc: object) -> None:
        await self.store.aclose()


async def test_a_redis_password_never_reaches_an_error_a_repr_or_the_settings(tmp_path: Path) -> None:

    url = f"redis://:pass-sekret-123@127.0.0.1:{free_port()}/0"  # nothing listens there
    async with _redis_store_at(url) as store:
        with pytest.raises(StateUnavailable) as caught:
            await store.load("ses_000000000000000000000000")
    settings = ServeSettings.from_env({"AGENT_SDK_STATE_URL": url})
    for text in (str(caught.value), repr(store), repr(settings), str(settings.model_dump())):
        assert "pass-sekret-123" not in text
    assert "127.0.0.1" in str(caught.value) and "retry" in str(caught.value)
    args = build_parser().parse_args(["serve", "--dir", str(tmp_path), "--state-url", "http://:pass-sekret-123@x/"])
    with pytest.raises(CliError) as bad:  # what `serve` prints for a URL that is not Redis
        settings_from_args(args)
    assert "state_url" in str(bad.value) and "redis://" in str(bad.value) and "pass-sekret-123" not in str(bad.value)


class _redis_store_at(_redis_store):
    def __init__(self, url: str) -> None:
        self.store = RedisSessionStore(url, patience_s=1.0)


async def test_a_turn_write_retried_after_its_reply_was_lost_lands_once(redis: RedisServer) -> None:
    """The retry `RedisSessionStore` makes when Redis went away mid-write carries the same operation id: a
    write that had landed is not made twice, even with a request's unfenced write in between."""
    from gateway.sessions._redis import _pairs  # pyright: ignore[reportPrivateUsage]

    async with _redis_store(redis) as store:
        record = _record("alice", 1)
        sid = record.id
        await store.create(record)
        assert await store.begin_turn(sid, "turn_a", "r1:turn_a", 30, [])
        write = {"keys": [f"{store._p}s:{sid}", f"{store._p}s:{sid}:ev"]}  # pyright: ignore[reportPrivateUsage]
        args = ["r1:turn_a", "op-1", *_pairs([new_event(sid, "message.appended", {"text": "x"}, "turn_a")])]
        append = store._scripts["APPEND"]  # pyright: ignore[reportPrivateUsage]
        await append(**write, args=args)
        await store.append(sid, [new_event(sid, "action.result", {}, "tool_1")])  # a direct call's record
        await append(**write, args=args)  # the retry of a write whose answer was lost
        types = [e["type"] for e in await store.read(sid, 0)]
    assert types == ["message.appended", "action.result"]


class HistoryRunner:
    """Records the history each turn gets, and answers at once."""

    name = "history"

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, str]]] = []
        self.done = anyio.Event()

    async def run(
        self, session: SessionInfo, message: str, toolset: Toolset, *, history: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[Any]:
        self.seen.append(list(history))
        yield FinalText(text=f"re: {message}")
        self.done.set()


async def test_a_follow_up_gets_the_conversation_from_the_last_events_only(
    unopened: SessionStore, tmp_path: Path
) -> None:
    store = unopened
    runner = HistoryRunner()
    builder = TurnBuilder(Project(root=tmp_path), list_tools=None, call_tool=None)  # type: ignore[arg-type]
    async with SessionService.running(store, builder, runner) as service:  # type: ignore[arg-type]
        live = await service.create("alice", "first")
        with anyio.fail_after(10):
            await runner.done.wait()
        # A long conversation: far more message events than the bound reaches back.
        turns = HISTORY_EVENTS  # each turn below is 2 events, so the log is about 2 x the bound
        events = []
        for n in range(turns):
            events += [
                new_event(live.id, "message.received", {"text": f"q{n}"}),
                new_event(live.id, "message.completed", {"text": f"a{n}"}),
            ]
        assert await store.append(live.id, events)
        runner.done = anyio.Event()
        await service.follow_up(live, "last", None)
        with anyio.fail_after(10):
            await runner.done.wait()
    history = runner.seen[-1]
    assert 0 < len(history) <= HISTORY_EVENTS
    assert history[-2:] == [("user", f"q{turns - 1}"), ("assistant", f"a{turns - 1}")]  # the newest, in order
    assert ("user", "first") not in history  # the oldest are beyond the bound
