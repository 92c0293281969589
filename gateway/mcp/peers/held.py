"""`HeldCalls`: a 2026-07-28 peer's call held open while an upstream's mid-call question waits for its retry.

A handshake-era upstream asks mid-call (`elicitation/create`, `sampling/createMessage`) and waits on
the open request for the answer; a 2026-07-28 peer cannot be asked mid-call: it expects an
`InputRequiredResult` and answers by retrying. The gateway bridges the two by holding the call:

1. a 2026-07-28 peer's call that can answer runs as a task of its own (`start`), whose input handlers
   put each question in the call's queue and wait, each at most `HOLD_TIMEOUT_S`, for its answer;
2. `next` waits for what comes first: the result (returned as is, the call is over), or questions
   (returned as an `InputRequiredResult` whose keys name them; the call stays held);
3. the peer's retry carries the held call's id in its sealed `requestState` (`gateway/mcp/peers/input.py`) and its
   `inputResponses`; `answer` hands each response to the question it names, and `next` again.

A question not answered in time fails upstream with a sentence (the upstream sees an error answer
to its request), and the call ends. A peer that goes away while `next` waits cancels the held call.
A call that ends drops its questions still waiting: the upstream's requests get an error answer at
once, not after `HOLD_TIMEOUT_S`. Each principal holds at most `principal_caps.MAX_HELD` calls; past
that its next call that can answer is refused with a sentence, and no other principal's is.
The call is held by this process: the retry must reach the same replica (route by the principal's
credential, or keep one replica per peer, docs/deploy.md); on another replica it is refused with a
sentence, never answered by another call.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections.serving import CallContext, InputHandler, calling

from .caps import MAX_HELD, PerPrincipal

__all__ = ["HOLD_TIMEOUT_S", "HeldCall", "HeldCalls"]

HOLD_TIMEOUT_S = 300.0
"""How long a held call waits for the peer's retry carrying the answer to one question."""
_INPUT_REQUIRED = "input_required"


@dataclass(slots=True, eq=False)
class HeldCall:
    """One call held for a peer: its task, the questions it has asked, and the answers it waits for."""

    id: str
    principal: str
    tool: str
    events: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue[tuple[str, Any]])
    """("ask", key) for a question, ("done", result) or ("raised", exception) once the call ended."""
    questions: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    waiting: dict[str, asyncio.Future[dict[str, Any]]] = field(
        default_factory=dict[str, "asyncio.Future[dict[str, Any]]"]
    )
    task: asyncio.Task[None] | None = None
    asked: int = 0


class HeldCalls:
    """The calls this process holds for peers, by id (module docstring)."""

    __slots__ = ("_held", "_per_principal", "_timeout")

    def __init__(self, timeout_s: float = HOLD_TIMEOUT_S, *, per_principal: int = MAX_HELD) -> None:
        self._held: dict[str, HeldCall] = {}
        self._timeout = timeout_s
        self._per_principal = PerPrincipal(per_principal, _too_many_held)

    def start(
        self, principal: str, tool: str, context: CallContext, run: Callable[[], Awaitable[dict[str, Any]]]
    ) -> HeldCall:
        """Run `run()` (the call, returning its result as JSON) as a held call whose input handlers are
        put on `context` for the features it declared (`context.capabilities`). Raises `principal_caps.AtCap`
        when `principal` already holds its `MAX_HELD` calls."""
        self._per_principal.take(principal)
        held = HeldCall(id=secrets.token_urlsafe(16), principal=principal, tool=tool)
        declared = context.capabilities or {}
        if "elicitation" in declared:
            context.elicitation = self._asking(held, "elicitation/create")
        if "sampling" in declared:
            context.sampling = self._asking(held, "sampling/createMessage")

        async def body() -> None:
            try:
                with calling(context):
                    held.events.put_nowait(("done", await run()))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # handed to whoever waits in `next`, who reports it as the call's failure
                held.events.put_nowait(("raised", exc))
            finally:
                self._drop(held)

        self._held[held.id] = held
        held.task = asyncio.get_running_loop().create_task(body())
        held.task.add_done_callback(lambda _: self._drop(held))  # also a task cancelled before it ran
        return held

    def find(self, held_id: str | None, principal: str, tool: str) -> HeldCall:
        """The held call `held_id` of `principal`'s `tool`. Raises `MCPError` (INVALID_PARAMS) when this
        process holds no such call: it ended (answered late), or another replica holds it."""
        held = self._held.get(held_id) if held_id is not None else None
        if held is None or held.principal != principal or held.tool != tool:
            raise MCPError(
                code=mt.INVALID_PARAMS,
                message="requestState refused: the call it continues is not held here any more (it ended, or its "
                "answers came too late, or another gateway replica holds it): call the tool again",
            )
        return held

    def answer(self, held: HeldCall, responses: Mapping[str, Any] | None) -> None:
        """Hand each of the peer's `inputResponses` to the question it names. Raises `MCPError` (INVALID_PARAMS)
        when a question waiting for an answer has none."""
        for key, future in list(held.waiting.items()):
            response = responses.get(key) if responses is not None else None
            if not isinstance(response, Mapping):
                raise MCPError(code=mt.INVALID_PARAMS, message=f"inputResponses has no answer for {key!r}")
            if not future.done():
                future.set_result(dict(response))

    async def next(self, held: HeldCall) -> dict[str, Any]:
        """The call's result once it ended, or an `InputRequiredResult` naming the questions it waits on.
        A caller cancelled here (the peer went away) cancels the held call. Raises what the call raised."""
        try:
            kind, value = await held.events.get()
        except BaseException:
            if held.task is not None:
                held.task.cancel()
            self._drop(held)
            raise
        if kind == "raised":
            raise value
        if kind == "done":
            return value
        asked = {value: held.questions[value]}
        while not held.events.empty():  # questions asked meanwhile go in the same round
            kind, more = held.events.get_nowait()
            if kind != "ask":
                held.events.put_nowait((kind, more))
                break
            asked[more] = held.questions[more]
        return {"resultType": _INPUT_REQUIRED, "inputRequests": asked}

    def _drop(self, held: HeldCall) -> None:
        """The call ended: forget it (once), and end the questions it still waits on."""
        if self._held.pop(held.id, None) is None:
            return
        self._per_principal.release(held.principal)
        for future in held.waiting.values():
            if not future.done():
                future.set_exception(_ended())

    def _asking(self, held: HeldCall, method: str) -> InputHandler:
        async def ask(params: dict[str, Any]) -> dict[str, Any]:
            if held.id not in self._held:  # asked after its call ended: nobody will answer
                raise _ended()
            held.asked += 1
            key = f"{method.split('/')[0]}-{held.asked}"
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            held.questions[key] = {"method": method, "params": params}
            held.waiting[key] = future
            held.events.put_nowait(("ask", key))
            try:
                with anyio.fail_after(self._timeout):
                    return await future
            except TimeoutError:
                raise MCPError(
                    code=mt.INTERNAL_ERROR,
                    message=f"the caller did not answer the {method} request within {self._timeout:g}s",
                ) from None
            finally:
                held.waiting.pop(key, None)
                held.questions.pop(key, None)

        return ask

    def held_by(self, principal: str) -> int:
        """How many calls this process holds for `principal`."""
        return self._per_principal.count(principal)

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, held_id: object) -> bool:
        return held_id in self._held


def _too_many_held(limit: int) -> str:
    return (
        f"this caller already has {limit} calls held waiting for its answers on this gateway: answer them (retry "
        "each with its requestState and inputResponses) or let them lapse, then call again"
    )


def _ended() -> MCPError:
    return MCPError(code=mt.INTERNAL_ERROR, message="the tool call this request belongs to has ended")
