"""One turn's run: build the toolset, drive the runner, put each step on the stream, keep the lease.

Every write goes through the store with the turn's lease holder, so a turn whose lease was lost
(another replica closed it as `interrupted`) writes nothing more and is cancelled here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from connections import SessionInfo, Toolset, TurnBuilder, TurnBuildError, TurnProblem, acting_for

from ..errors import StateUnavailable
from ..runners import FinalText, MessageDelta, RunnerError, ToolCalled, ToolReturned, TurnRunner, Usage
from ._protocol import SessionStore
from ._records import SessionRecord, closing_events, interrupted_outcome, new_event
from ._turn_log import log_failed_turn

__all__ = ["Turn", "TurnHost", "run_turn"]


@dataclass(slots=True)
class Turn:
    """A turn running in this process."""

    id: str
    holder: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    lost: bool = False
    """The lease was lost (reaped by another replica, or the store stayed away too long): write nothing more."""
    caller: Any = None
    """The principal of the request that started the turn (`session.principal` for its toolset and runner);
    held in this process only, never stored: a turn runs where it started, to its end or its lease's."""


class TurnHost(Protocol):
    """What a turn needs of the service that runs it (`SessionService`)."""

    store: SessionStore
    builder: TurnBuilder
    runner: TurnRunner
    lease_s: float
    closing: bool
    on_turn_end: Callable[[str], None] | None
    narrow: Narrow | None
    wrap_toolset: Callable[[Toolset, Any], Toolset] | None
    sign_in_links: Callable[[list[TurnProblem], str], list[dict[str, str]]] | None


Narrow = Callable[[SessionInfo, Toolset], tuple[Toolset, dict[str, Any]]]
"""A turn's toolset narrowed for its session's principal, and what `turn.started` says of it."""


logger = logging.getLogger("agent_sdk.sessions")


class _Writer:
    """The turn's fenced writes."""

    def __init__(self, service: TurnHost, record: SessionRecord, turn: Turn) -> None:
        self.store = service.store
        self.sid = record.id
        self.turn = turn

    async def emit(self, kind: str, data: dict[str, Any]) -> None:
        if self.turn.lost:
            return
        try:
            kept = await self.store.append(self.sid, [new_event(self.sid, kind, data, self.turn.id)], self.turn.holder)
        except StateUnavailable:
            kept = False
        if not kept:
            self.lose("its lease was lost")

    def lose(self, why: str) -> None:
        if not self.turn.lost:
            logger.warning("turn %s of session %s stops here: %s", self.turn.id, self.sid, why)
        self.turn.lost = True
        self.turn.scope.cancel()


async def _keep_lease(service: TurnHost, writer: _Writer) -> None:
    """Renew the lease every third of its length; a refused renewal means another replica closed the turn."""
    turn, every = writer.turn, service.lease_s / 3
    deadline = anyio.current_time() + service.lease_s
    while True:
        await anyio.sleep(every)
        try:
            if not await service.store.renew(writer.sid, turn.holder, service.lease_s):
                writer.lose("another replica closed it after its lease lapsed")
                return
            deadline = anyio.current_time() + service.lease_s
        except StateUnavailable:
            if anyio.current_time() >= deadline:
                writer.lose("the state store was unreachable for longer than the lease")
                return
            every = 0.25


async def run_turn(
    service: TurnHost, record: SessionRecord, turn: Turn, message: str, history: list[tuple[str, str]]
) -> None:
    """Run `turn` to its end and close it on the stream (unless its lease was lost)."""
    writer = _Writer(service, record, turn)
    outcome: dict[str, Any] = {"status": "cancelled", "error": "turn_interrupted", "message": "turn interrupted"}
    crash: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            if service.store.shared:
                tg.start_soon(_keep_lease, service, writer)
            try:  # inside the task group, so that a runner's error is not wrapped in an exception group
                # The turn's calls are its session owner's (a `per_principal` connection's own upstream session).
                with turn.scope, acting_for(record.owner):
                    outcome = await _body(service, record, writer, message, history)
            except RunnerError as exc:
                outcome = {"status": "failed", "error": "runner_failed", "message": str(exc)}
            except Exception as exc:  # boundary: a runner bug ends the turn, not the server; no traceback on the wire
                crash = exc
                crashed = f"the turn crashed ({type(exc).__name__})"
                outcome = {"status": "failed", "error": "internal_error", "message": crashed}
            finally:
                tg.cancel_scope.cancel()
    finally:
        if service.closing and outcome.get("error") == "turn_interrupted":
            outcome = interrupted_outcome("server_stopping")
        if outcome["status"] != "completed":
            log_failed_turn(record.id, turn.id, outcome, crash)
        if service.on_turn_end is not None:
            service.on_turn_end(outcome["status"])
        with anyio.CancelScope(shield=True):
            await _close(service, record, turn, outcome)


async def _close(service: TurnHost, record: SessionRecord, turn: Turn, outcome: dict[str, Any]) -> None:
    if turn.lost:
        return
    try:
        with anyio.fail_after(service.lease_s + 5):
            closed = await service.store.end_turn(
                record.id, turn.holder, {"turnId": turn.id, **outcome}, closing_events(record.id, turn.id, outcome)
            )
    except (StateUnavailable, TimeoutError):
        closed = False
    if not closed:  # another replica closes it as interrupted once the lease lapses
        logger.warning("could not close turn %s of session %s; its lease will lapse", turn.id, record.id)


async def _body(
    service: TurnHost, record: SessionRecord, writer: _Writer, message: str, history: list[tuple[str, str]]
) -> dict[str, Any]:
    info = dataclasses.replace(record.info(), principal=writer.turn.caller)
    started: dict[str, Any] = {"runner": service.runner.name}
    try:
        toolset = await service.builder.build(info)
    except TurnBuildError as exc:
        await writer.emit("turn.started", started)
        failed: dict[str, Any] = {
            "status": "failed",
            "error": exc.code,
            "message": str(exc),
            "problems": [p.to_json() for p in exc.problems],
        }
        # A per-user connection the owner has not signed in to: the way in (gateway/mcp/sign_in.py).
        signs = service.sign_in_links(exc.problems, record.owner) if service.sign_in_links is not None else []
        if signs:
            failed["signIn"] = signs
        return failed
    if service.narrow is not None:  # the policy's share of the toolset, said in `turn.started` (never silent)
        toolset, said = service.narrow(info, toolset)
        started.update(said)
    if service.wrap_toolset is not None:  # audit, limits, approval (docs/audit.md)
        toolset = service.wrap_toolset(toolset, writer.turn.caller or info.auth)
    await writer.emit("turn.started", started)
    reply = ""
    usage: dict[str, int] = {}
    async for event in service.runner.run(info, message, toolset, history=history):
        if isinstance(event, MessageDelta):
            await writer.emit("message.appended", {"text": event.text})
        elif isinstance(event, ToolCalled):
            actions = [{"callId": event.call_id, "name": event.name, "input": event.input}]
            await writer.emit("actions.requested", {"actions": actions})
        elif isinstance(event, ToolReturned):
            result = {
                "callId": event.call_id,
                "toolName": event.name,
                "isError": event.is_error,
                "result": event.result,
            }
            await writer.emit("action.result", result)
        elif isinstance(event, Usage):
            usage = {"inputTokens": event.input_tokens, "outputTokens": event.output_tokens}
        elif isinstance(event, FinalText):  # pyright: ignore[reportUnnecessaryIsInstance]
            reply = event.text
    await writer.emit("message.completed", {"text": reply})
    return {"status": "completed", "reply": reply, "usage": usage}  # `turn.completed` is written with the close
