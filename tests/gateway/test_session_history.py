"""A follow-up's runner gets the conversation from the session's last `HISTORY_EVENTS` events, not its whole
log, on both stores (files, and a real Redis): its cost does not grow with the conversation."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from connections import Project, SessionInfo, Toolset, TurnBuilder
from gateway.runners import FinalText
from gateway.sessions import FileSessionStore, RedisSessionStore, SessionService, SessionStore
from gateway.sessions._records import new_event
from gateway.sessions._service import HISTORY_EVENTS

from .replicas import RedisServer, redis_server

pytestmark = [pytest.mark.anyio, pytest.mark.peers]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(params=["file", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path, redis: RedisServer) -> SessionStore:
    if request.param == "file":
        return FileSessionStore(tmp_path)
    return RedisSessionStore(redis.url, prefix=f"t{secrets.token_hex(4)}:", patience_s=1.0)


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


async def test_a_follow_up_gets_the_conversation_from_the_last_events_only(store: SessionStore, tmp_path: Path) -> None:
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
