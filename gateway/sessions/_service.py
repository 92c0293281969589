"""`SessionService`: chat sessions, their turns and their event streams (docs/http-api.md).

Sessions live in a `SessionStore` (files, or Redis shared by replicas); this service keeps only
the turns running in this process. A turn runs on the process that accepted it, under a lease in
the store that it renews; every write of the turn is checked against that lease, so a replica
that lost it (it stalled, or another replica declared it dead) can no longer write. A session has
at most one running turn: a follow-up preempts it (cancel, wait for it to settle, then run the new
message) and a stop cancels it, wherever it runs: a turn on another replica is asked over the
store's cancel channel. A lapsed lease (its replica died) is closed by whichever replica notices
first, with one `turn.interrupted`-style `turn.failed` (status `interrupted`), once.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup

from connections import ToolOutcome, Toolset, TurnBuilder, TurnProblem

from ..errors import (
    Forbidden,
    SessionBusy,
    SessionNotFound,
    StaleContinuationToken,
    StateUnavailable,
)
from ..runners import TurnRunner
from ._live import LiveSession, parse_continuation_token
from ._protocol import SessionStore
from ._records import SESSION_ID, SessionRecord, closing_events, interrupted_outcome, new_event, now
from ._turns import Narrow, Turn, run_turn

__all__ = ["SessionService"]

logger = logging.getLogger("agent_sdk.sessions")

_PREEMPT_GRACE_S = 30.0
_REAP_EVERY_S = 1.0
_NUDGE_EVERY_S = 1.0
HISTORY_EVENTS = 2000
"""A follow-up's runner gets the conversation from at most this many of the session's last events, so
its cost does not grow with the conversation's length (docs/http-api.md)."""


class SessionService:
    """Runs this process's turns over a `SessionStore`. Use `async with SessionService.running(...) as service`."""

    def __init__(
        self, store: SessionStore, builder: TurnBuilder, runner: TurnRunner, tg: TaskGroup, *, lease_s: float
    ) -> None:
        self.store = store
        self.builder = builder
        self.runner = runner
        self.lease_s = lease_s
        self.closing = False
        self._tg = tg
        self._replica = secrets.token_hex(6)
        self._local: dict[str, Turn] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self.on_turn_end: Callable[[str], None] | None = None
        """Told each finished turn's status (the gateway's metrics)."""
        self.narrow: Narrow | None = None
        """Narrows each turn's toolset to what its principal may call (the gateway's policy, `gateway/policy/`)."""
        self.wrap_toolset: Callable[[Toolset, Any], Toolset] | None = None
        """Given each turn's toolset and its caller, the toolset the turn runs with (the gateway's `CallGuard`)."""
        self.sign_in_links: Callable[[list[TurnProblem], str], list[dict[str, str]]] | None = None
        """A failed build's sign-in URLs for the turn's owner (`gateway/mcp/sign_in.py`), set by the app."""

    @classmethod
    @asynccontextmanager
    async def running(
        cls, store: SessionStore, builder: TurnBuilder, runner: TurnRunner, *, lease_s: float = 10.0
    ) -> AsyncGenerator[SessionService]:
        """Open the store (a one-process store closes turns a restart cut off), run turns until exit, then
        cancel them (they end `interrupted`). Raises `OSError` for an unusable state root."""
        await store.open()
        try:
            async with anyio.create_task_group() as tg:
                service = cls(store, builder, runner, tg, lease_s=lease_s)
                tg.start_soon(service._listen_for_cancels)
                if store.shared:
                    tg.start_soon(service._reap_lapsed)
                try:
                    yield service
                finally:
                    service.closing = True
                    tg.cancel_scope.cancel()
        finally:
            await store.aclose()

    # -- lookup --------------------------------------------------------------------------------

    async def get(self, session_id: object, principal: str) -> LiveSession:
        """The session, if `principal` owns it. Raises `SessionNotFound`, `Forbidden`, `StateUnavailable`."""
        record = None
        if isinstance(session_id, str) and SESSION_ID.fullmatch(session_id):
            record = await self.store.load(session_id)
        if record is None:
            raise SessionNotFound(f"no session {str(session_id)[:64]!r}")
        if record.owner != principal:
            raise Forbidden("this session belongs to another principal")
        return LiveSession(record)

    async def by_token(self, token: str, principal: str) -> LiveSession | None:
        """The session whose current continuation token this is (owner-checked), or None."""
        parse_continuation_token(token)
        found = await self.store.find_token(token)
        return None if found is None or not found[1] else await self.get(found[0], principal)

    async def for_follow_up(self, token: str, principal: str) -> LiveSession:
        """The session a follow-up by token alone continues. Raises `InvalidContinuationToken`,
        `StaleContinuationToken` (a rotated-away token), `SessionNotFound`, `Forbidden`, `StateUnavailable`."""
        parse_continuation_token(token)
        found = await self.store.find_token(token)
        if found is None:
            raise SessionNotFound("no session has this continuation token")
        live = await self.get(found[0], principal)
        if not found[1]:
            raise StaleContinuationToken("this continuation token is stale; use the one the last reply returned")
        return live

    async def page(
        self, principal: str, before: tuple[int, str] | None, limit: int
    ) -> tuple[list[LiveSession], tuple[int, str] | None]:
        """One page of `principal`'s sessions, newest first, and the cursor of the next page (None at the end)."""
        records, nxt = await self.store.page(principal, before, limit)
        return [LiveSession(r) for r in records], nxt

    # -- sessions and turns --------------------------------------------------------------------

    async def create(
        self,
        principal: str,
        message: str,
        *,
        title: str | None = None,
        purpose: str = "live",
        caller: object = None,
    ) -> LiveSession:
        """A new chat session owned by `principal`, its first turn started (`caller`: the request's principal,
        the turn's `session.principal`). Raises `StateUnavailable`."""
        record = SessionRecord(
            id=f"ses_{secrets.token_hex(12)}",
            owner=principal,
            continuation_token=self._new_token(),
            created_at=now(),
            title=title,
            purpose="eval" if purpose == "eval" else "live",
        )
        await self.store.create(record)
        started = {"channelId": record.channel_id, "mode": record.mode, "title": title}
        # A new session has no turn to settle and no history: its first events and its lease in one write.
        turn = self._new_turn(caller)
        first = [new_event(record.id, "session.started", started), self._received(record.id, turn, message)]
        if not await self.store.begin_turn(record.id, turn.id, turn.holder, self.lease_s, first):
            raise SessionBusy(f"session {record.id} already runs a turn")  # pragma: no cover - it was just made
        return self._launch(record, turn, message, [], len(first))

    async def follow_up(
        self, live: LiveSession, message: str, token: str | None, *, caller: object = None
    ) -> LiveSession:
        """Start a turn on `message`, preempting a running one (here or on another replica). With `token`, it
        must be the current one; the token rotates either way.

        Raises `InvalidContinuationToken` (malformed), `StaleContinuationToken` (not the current one),
        `SessionBusy` (the running turn did not stop within the grace period), `StateUnavailable`.
        """
        if token is not None:
            parse_continuation_token(token)
        async with self._lock(live.id):
            if not await self.store.rotate(live.id, token, self._new_token()):
                raise StaleContinuationToken("this continuation token is stale; use the one the last reply returned")
            return await self._start(live.id, message, caller)

    async def stop(self, live: LiveSession) -> bool:
        """Cancel the running turn, wherever it runs (it ends in `turn.failed` with status `cancelled`); False
        when idle. Raises `SessionBusy` when it did not stop within the grace period, `StateUnavailable`."""
        async with self._lock(live.id):
            if (await self._load(live.id)).turn is None:
                return False
            await self._settle(live.id)
            return True

    async def wait(self, live: LiveSession, seconds: float) -> LiveSession:
        """The session once its running turn settles or `seconds` pass, whichever is first."""
        with anyio.move_on_after(max(0.0, seconds)):
            while True:
                record = await self._load(live.id)
                if record.turn is None:
                    return LiveSession(record)
                local = self._local.get(live.id)
                if local is not None and local.id == record.turn:
                    await local.done.wait()
                else:
                    await self.store.read(live.id, record.event_count, block_s=2.0)
        return LiveSession(await self._load(live.id))

    async def events(self, live: LiveSession, start: int = 0) -> list[dict[str, Any]]:
        """The session's events from index `start`, read from the store."""
        return await self.store.read(live.id, start)

    async def follow(self, live: LiveSession, start: int) -> AsyncIterator[dict[str, Any]]:
        """Every event from index `start`, then each new one as it is appended (until cancelled)."""
        index = max(0, start)
        while True:
            for event in await self.store.read(live.id, index, block_s=10.0, limit=500):
                yield event
                index += 1

    async def record_tool_call(
        self, live: LiveSession, call_id: str, name: str, arguments: Any, outcome: ToolOutcome | None, duration_ms: int
    ) -> None:
        """Put a direct (session-bound) tool call on the session's stream under its own turn id."""
        data: dict[str, Any] = {"callId": call_id, "toolName": name, "durationMs": duration_ms, "direct": True}
        if outcome is not None:
            data.update(isError=outcome.is_error, result=outcome.result)
        requested = {"actions": [{"callId": call_id, "name": name, "input": arguments}]}
        await self.store.append(
            live.id,
            [
                new_event(live.id, "actions.requested", requested, call_id),
                new_event(live.id, "action.result", data, call_id),
            ],
        )

    # -- internals -----------------------------------------------------------------------------

    def _new_token(self) -> str:
        return f"http:{secrets.token_urlsafe(24)}"

    @asynccontextmanager
    async def _lock(self, session_id: str) -> AsyncGenerator[None]:
        # One follow-up or stop at a time per session in this process; across replicas the token's
        # compare-and-set and the store's turn lease keep them apart. The lock is dropped when no one
        # holds or waits for it, so memory does not grow with the sessions ever followed up.
        lock = self._locks.setdefault(session_id, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self._locks.pop(session_id, None)

    async def _load(self, session_id: str) -> SessionRecord:
        record = await self.store.load(session_id)
        if record is None:
            raise SessionNotFound(f"no session {session_id!r}")
        return record

    async def _settle(self, session_id: str) -> SessionRecord:
        """Cancel the running turn, wherever it runs, and wait until the session is idle; the idle record.

        A turn on another replica is asked over the store's cancel channel (again each second, in case the
        request was lost); one whose lease lapsed meanwhile (its replica died) is closed here.
        """
        nudged = reaped = float("-inf")
        try:
            with anyio.fail_after(_PREEMPT_GRACE_S):
                while True:
                    record = await self._load(session_id)
                    if record.turn is None:
                        return record
                    local = self._local.get(session_id)
                    if local is not None and local.id == record.turn:
                        local.scope.cancel()
                        await local.done.wait()
                        continue
                    clock = anyio.current_time()
                    if clock - nudged >= _NUDGE_EVERY_S:
                        await self.store.request_cancel(session_id, record.turn)
                        nudged = clock
                    if self.store.shared and clock - reaped >= _REAP_EVERY_S:
                        await self._reap(session_id, record.turn)
                        reaped = clock
                    await self.store.read(session_id, record.event_count, block_s=0.25)
        except TimeoutError:
            raise SessionBusy(
                f"the running turn of session {session_id} did not stop within {_PREEMPT_GRACE_S:g} s; retry"
            ) from None

    async def _start(self, session_id: str, message: str, caller: object) -> LiveSession:
        while True:
            record = await self._settle(session_id)
            # The tail of the log only: reading it whole made every follow-up cost the conversation so far.
            history = _history(await self.store.read(session_id, max(0, record.event_count - HISTORY_EVENTS)))
            turn = self._new_turn(caller)
            if await self.store.begin_turn(
                session_id, turn.id, turn.holder, self.lease_s, [self._received(session_id, turn, message)]
            ):
                return self._launch(record, turn, message, history, 1)
            # Another replica started a turn between our settle and our begin: settle it too.

    def _new_turn(self, caller: object) -> Turn:
        turn_id = f"turn_{uuid.uuid4().hex[:16]}"
        return Turn(id=turn_id, holder=f"{self._replica}:{turn_id}", caller=caller)

    def _received(self, session_id: str, turn: Turn, message: str) -> dict[str, Any]:
        return new_event(session_id, "message.received", {"text": message}, turn.id)

    def _launch(
        self, record: SessionRecord, turn: Turn, message: str, history: list[tuple[str, str]], written: int
    ) -> LiveSession:
        self._local[record.id] = turn
        record.turn = turn.id
        record.event_count += written
        self._tg.start_soon(self._run, record, turn, message, history)
        return LiveSession(record)

    async def _run(self, record: SessionRecord, turn: Turn, message: str, history: list[tuple[str, str]]) -> None:
        try:
            await run_turn(self, record, turn, message, history)
        finally:
            if self._local.get(record.id) is turn:
                del self._local[record.id]
            turn.done.set()

    async def _reap(self, session_id: str, turn_id: str) -> None:
        outcome = interrupted_outcome("owner_lost")
        last = {"turnId": turn_id, **outcome}
        if await self.store.reap(session_id, turn_id, last, closing_events(session_id, turn_id, outcome)):
            logger.warning("closed turn %s of session %s: its replica's lease lapsed", turn_id, session_id)

    async def _reap_lapsed(self) -> None:
        while True:
            await anyio.sleep(_REAP_EVERY_S)
            try:
                lapsed = await self.store.lapsed()
            except StateUnavailable:
                continue
            for session_id, turn_id in lapsed:
                try:  # one session Redis cannot write (a damaged record) must not keep the others' turns open
                    await self._reap(session_id, turn_id)
                except StateUnavailable:
                    continue

    async def _listen_for_cancels(self) -> None:
        async for session_id, turn_id in self.store.cancellations():
            local = self._local.get(session_id)
            if local is not None and local.id == turn_id:
                local.scope.cancel()


def _history(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The conversation so far, for runners that send it to a model."""
    out: list[tuple[str, str]] = []
    for event in events:
        data = event.get("data") or {}
        if event.get("type") == "message.received":
            out.append(("user", str(data.get("text", ""))))
        elif event.get("type") == "message.completed":
            out.append(("assistant", str(data.get("text", ""))))
    return out
