"""`SessionService`: chat sessions, their turns and their event streams (reference/sessions.md).

One task group (entered in the app lifespan) runs every turn. A session has at most one running
turn; a follow-up preempts it (cancel, wait for it to settle, then run the new message), a stop
cancels it. Every state change is an event `{type, index, sessionId, turnId?, at, data}`
appended to the store before anyone waiting on the session is woken.
"""

from __future__ import annotations

import logging
import re
import secrets
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from connections import SessionInfo, ToolOutcome, TurnBuilder, TurnBuildError

from ..errors import Forbidden, InvalidContinuationToken, SessionNotFound, StaleContinuationToken
from ..runners import FinalText, MessageDelta, RunnerError, ToolCalled, ToolReturned, TurnRunner, Usage
from ._store import SESSION_ID, FileSessionStore, SessionRecord
from ._turn_log import log_failed_turn

__all__ = ["LiveSession", "SessionService", "parse_continuation_token"]

logger = logging.getLogger("agent_sdk.sessions")

_TOKEN = re.compile(r"([a-z][a-z0-9_-]{0,31}):([A-Za-z0-9_\-.~/#@+=]{1,256})")
_PREEMPT_GRACE_S = 30.0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_continuation_token(token: object) -> tuple[str, str]:
    """`<channelId>:<key>` -> (channel id, key). Raises `InvalidContinuationToken` when malformed."""
    if not isinstance(token, str) or (match := _TOKEN.fullmatch(token)) is None:
        raise InvalidContinuationToken("continuationToken must look like <channelId>:<key>, as /v1/sessions lists it")
    return match.group(1), match.group(2)


@dataclass(slots=True)
class _Turn:
    id: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


@dataclass(slots=True)
class LiveSession:
    record: SessionRecord
    events: list[dict[str, Any]]
    changed: anyio.Event = field(default_factory=anyio.Event)
    turn: _Turn | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    last_turn: dict[str, Any] | None = None
    """The last finished turn: `{turnId, status, reply?, error?, message?, problems?}`."""

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def busy(self) -> bool:
        return self.turn is not None

    def info(self) -> SessionInfo:
        r = self.record
        return SessionInfo(
            id=r.id, channel_id=r.channel_id, mode=r.mode, purpose=r.purpose, auth=r.owner, title=r.title
        )

    def snapshot(self) -> dict[str, Any]:
        """What `check` and the session routes report."""
        out: dict[str, Any] = {
            "sessionId": self.id,
            "continuationToken": self.record.continuation_token,
            "title": self.record.title,
            "createdAt": self.record.created_at,
            "eventCount": len(self.events),
        }
        if self.turn is not None:
            out.update(status="running", turnId=self.turn.id)
        elif self.last_turn is not None:
            out.update(self.last_turn)
        else:
            out["status"] = "idle"
        return out


class SessionService:
    """Owns every session of this server. Use `async with SessionService.running(...) as service`."""

    def __init__(self, store: FileSessionStore, builder: TurnBuilder, runner: TurnRunner, tg: TaskGroup) -> None:
        self.store = store
        self.builder = builder
        self.runner = runner
        self._tg = tg
        self._sessions: dict[str, LiveSession] = {}
        self._by_token: dict[str, str] = {}
        self._retired: dict[str, str] = {}
        """Tokens a follow-up rotated away (this process's lifetime), so a stale one is told apart from a wrong one."""
        self.on_turn_end: Callable[[str], None] | None = None
        """Told each finished turn's status (the gateway's metrics)."""

    @classmethod
    @asynccontextmanager
    async def running(
        cls, store: FileSessionStore, builder: TurnBuilder, runner: TurnRunner
    ) -> AsyncGenerator[SessionService]:
        """Load the stored sessions (closing turns a restart cut off), run turns until exit, then cancel them."""
        store.open()
        async with anyio.create_task_group() as tg:
            service = cls(store, builder, runner, tg)
            service._restore()
            try:
                yield service
            finally:
                tg.cancel_scope.cancel()

    # -- lookup --------------------------------------------------------------------------------

    def get(self, session_id: object, principal: str) -> LiveSession:
        """The session, if `principal` owns it. Raises `SessionNotFound` or `Forbidden`."""
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is None:
            raise SessionNotFound(f"no session {str(session_id)[:64]!r}")
        if live.record.owner != principal:
            raise Forbidden("this session belongs to another principal")
        return live

    def by_token(self, token: str, principal: str) -> LiveSession | None:
        """The session whose current continuation token this is (owner-checked), or None."""
        parse_continuation_token(token)
        session_id = self._by_token.get(token)
        return None if session_id is None else self.get(session_id, principal)

    def for_follow_up(self, token: str, principal: str) -> LiveSession:
        """The session a follow-up by token alone continues. Raises `InvalidContinuationToken`,
        `StaleContinuationToken` (a rotated-away token), `SessionNotFound`, `Forbidden`."""
        live = self.by_token(token, principal)
        if live is not None:
            return live
        retired = self._retired.get(token)
        if retired is not None:
            self.get(retired, principal)
            raise StaleContinuationToken("this continuation token is stale; use the one the last reply returned")
        raise SessionNotFound("no session has this continuation token")

    def owned_by_all(self) -> list[LiveSession]:
        return list(self._sessions.values())

    def owned_by(self, principal: str) -> list[LiveSession]:
        return sorted(
            (s for s in self._sessions.values() if s.record.owner == principal), key=lambda s: s.record.created_at
        )

    # -- sessions and turns --------------------------------------------------------------------

    async def create(
        self, principal: str, message: str, *, title: str | None = None, purpose: str = "live"
    ) -> LiveSession:
        """A new chat session owned by `principal`, its first turn started."""
        record = SessionRecord(
            id=f"ses_{secrets.token_hex(12)}",
            owner=principal,
            continuation_token=self._new_token(),
            created_at=_now(),
            title=title,
            purpose="eval" if purpose == "eval" else "live",
        )
        self.store.save(record)
        live = LiveSession(record=record, events=[])
        self._sessions[record.id] = live
        self._by_token[record.continuation_token] = record.id
        self._emit(live, "session.started", {"channelId": record.channel_id, "mode": record.mode, "title": title})
        self._start_turn(live, message)
        return live

    async def follow_up(self, live: LiveSession, message: str, token: str | None) -> LiveSession:
        """Start a turn on `message`, preempting a running one. With `token`, it must be the current one.

        Raises `InvalidContinuationToken` (malformed) or `StaleContinuationToken` (not the current one).
        """
        if token is not None:
            parse_continuation_token(token)
            if not secrets.compare_digest(token.encode(), live.record.continuation_token.encode()):
                raise StaleContinuationToken("this continuation token is stale; use the one the last reply returned")
        async with live.lock:
            await self._settle(live)
            self._by_token.pop(live.record.continuation_token, None)
            self._retired[live.record.continuation_token] = live.id
            live.record.continuation_token = self._new_token()
            self._by_token[live.record.continuation_token] = live.id
            self.store.save(live.record)
            self._start_turn(live, message)
        return live

    async def stop(self, live: LiveSession) -> bool:
        """Cancel the running turn (it ends in `turn.failed` with status `cancelled`); False when idle."""
        async with live.lock:
            was_busy = live.busy
            await self._settle(live)
            return was_busy

    async def wait(self, live: LiveSession, seconds: float) -> None:
        """Return when the running turn settles or `seconds` pass, whichever is first."""
        with anyio.move_on_after(max(0.0, seconds)):
            while (turn := live.turn) is not None:
                await turn.done.wait()

    async def follow(self, live: LiveSession, start: int) -> AsyncIterator[dict[str, Any]]:
        """Every event from index `start`, then each new one as it is appended (until cancelled)."""
        index = max(0, start)
        while True:
            changed = live.changed
            while index < len(live.events):
                yield live.events[index]
                index += 1
            await changed.wait()

    def record_tool_call(
        self, live: LiveSession, call_id: str, name: str, arguments: Any, outcome: ToolOutcome | None, duration_ms: int
    ) -> None:
        """Put a direct (session-bound) tool call on the session's stream under its own turn id."""
        self._emit(
            live, "actions.requested", {"actions": [{"callId": call_id, "name": name, "input": arguments}]}, call_id
        )
        data: dict[str, Any] = {"callId": call_id, "toolName": name, "durationMs": duration_ms, "direct": True}
        if outcome is not None:
            data.update(isError=outcome.is_error, result=outcome.result)
        self._emit(live, "action.result", data, call_id)

    # -- internals -----------------------------------------------------------------------------

    def _new_token(self) -> str:
        return f"http:{secrets.token_urlsafe(24)}"

    async def _settle(self, live: LiveSession) -> None:
        turn = live.turn
        if turn is None:
            return
        turn.scope.cancel()
        with anyio.fail_after(_PREEMPT_GRACE_S):
            await turn.done.wait()

    def _start_turn(self, live: LiveSession, message: str) -> None:
        turn = _Turn(id=f"turn_{uuid.uuid4().hex[:16]}")
        history = _history(live.events)
        live.turn = turn
        self._emit(live, "message.received", {"text": message}, turn.id)
        self._tg.start_soon(self._run_turn, live, turn, message, history)

    async def _run_turn(self, live: LiveSession, turn: _Turn, message: str, history: list[tuple[str, str]]) -> None:
        emit: Callable[[str, dict[str, Any]], None] = lambda kind, data: self._emit(live, kind, data, turn.id)  # noqa: E731
        outcome: dict[str, Any] = {"status": "cancelled", "error": "turn_interrupted", "message": "turn interrupted"}
        crash: Exception | None = None
        try:
            with turn.scope:
                emit("turn.started", {"runner": self.runner.name})
                outcome = await self._turn_body(live, turn, message, history, emit)
        except RunnerError as exc:
            outcome = {"status": "failed", "error": "runner_failed", "message": str(exc)}
        except Exception as exc:  # boundary: a runner bug ends the turn, not the server; no traceback on the wire
            crash = exc
            outcome = {
                "status": "failed",
                "error": "internal_error",
                "message": f"the turn crashed ({type(exc).__name__})",
            }
        finally:
            status = outcome["status"]
            if status != "completed":
                log_failed_turn(live.id, turn.id, outcome, crash)
                emit("turn.failed", outcome)
            if self.on_turn_end is not None:
                self.on_turn_end(status)
            live.last_turn = {"turnId": turn.id, **outcome}
            live.turn = None
            emit("session.waiting", {})
            turn.done.set()

    async def _turn_body(
        self,
        live: LiveSession,
        turn: _Turn,
        message: str,
        history: list[tuple[str, str]],
        emit: Callable[[str, dict[str, Any]], None],
    ) -> dict[str, Any]:
        info = live.info()
        try:
            toolset = await self.builder.build(info)
        except TurnBuildError as exc:
            return {
                "status": "failed",
                "error": exc.code,
                "message": str(exc),
                "problems": [p.to_json() for p in exc.problems],
            }
        reply = ""
        usage: dict[str, int] = {}
        async for event in self.runner.run(info, message, toolset, history=history):
            if isinstance(event, MessageDelta):
                emit("message.appended", {"text": event.text})
            elif isinstance(event, ToolCalled):
                emit(
                    "actions.requested",
                    {"actions": [{"callId": event.call_id, "name": event.name, "input": event.input}]},
                )
            elif isinstance(event, ToolReturned):
                emit(
                    "action.result",
                    {
                        "callId": event.call_id,
                        "toolName": event.name,
                        "isError": event.is_error,
                        "result": event.result,
                    },
                )
            elif isinstance(event, Usage):
                usage = {"inputTokens": event.input_tokens, "outputTokens": event.output_tokens}
            elif isinstance(event, FinalText):  # pyright: ignore[reportUnnecessaryIsInstance]
                reply = event.text
        emit("message.completed", {"text": reply})
        outcome = {"status": "completed", "reply": reply, "usage": usage}
        emit("turn.completed", outcome)
        return outcome

    def _emit(self, live: LiveSession, kind: str, data: dict[str, Any], turn_id: str | None = None) -> None:
        event: dict[str, Any] = {"type": kind, "index": len(live.events), "sessionId": live.id}
        if turn_id is not None:
            event["turnId"] = turn_id
        event.update(at=_now(), data=data)
        try:
            self.store.append(live.id, event)
        except OSError as exc:  # a full disk must not kill the turn; the event stays in memory
            logger.error("could not persist an event of session %s: %s", live.id, type(exc).__name__)
        live.events.append(event)
        changed, live.changed = live.changed, anyio.Event()
        changed.set()

    def _restore(self) -> None:
        for record, events in self.store.load_all():
            if not SESSION_ID.fullmatch(record.id):
                continue
            live = LiveSession(record=record, events=events)
            self._sessions[record.id] = live
            self._by_token[record.continuation_token] = record.id
            open_turns: dict[str, None] = {}
            for event in events:
                turn_id = event.get("turnId")
                if event.get("type") == "turn.started" and isinstance(turn_id, str):
                    open_turns[turn_id] = None
                elif event.get("type") in ("turn.completed", "turn.failed") and isinstance(turn_id, str):
                    open_turns.pop(turn_id, None)
                    data: dict[str, Any] = event.get("data") or {}
                    live.last_turn = {"turnId": turn_id, **data}
            for turn_id in open_turns:  # cut off by a crash or a kill: close it, as the stream's reader expects
                outcome = {
                    "status": "interrupted",
                    "error": "server_restarted",
                    "message": "the server stopped during this turn",
                }
                self._emit(live, "turn.failed", outcome, turn_id)
                live.last_turn = {"turnId": turn_id, **outcome}
                self._emit(live, "session.waiting", {})


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
