"""A peer's `tools/call` on `/v1/mcp/tools` while it runs: cancelled when the peer goes, streamed when asked.

The lane (`gateway/mcp/lane.py`) runs every `tools/call` through `until_gone`: the call is registered in
the runtime's `PeerCalls` under the peer (its principal and, at the handshake versions, its
`Mcp-Session-Id`: `peer_of`) and its request id (so its `notifications/cancelled` finds it), and is
cancelled when the POST's connection closes. A
cancelled call cancels the upstream call under it, which then sees `notifications/cancelled` with
its own request id (handshake era) or its own POST closed (2026-07-28), as for a timeout.

Only a call whose request asks for something besides the result (a `progressToken`, or a log level:
`io.modelcontextprotocol/logLevel` in `_meta` at 2026-07-28, the peer's `logging/setLevel` at
the handshake versions), or a handshake peer's that declared `elicitation` / `sampling`, is answered
with `text/event-stream`: its upstream's notifications and questions about it, then the answer, each
an SSE `message` event (`stream_answer`). Every other call keeps the plain JSON answer, the hot path.
The two answers are the two HTTP channels of the executor (`gateway/mcp/pipeline.py`): `JsonAnswer`
and `SseAnswer` implement `CallChannel` (notify, ask, cancel) once each.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as mt
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp_types import LOG_LEVEL_META_KEY
from starlette.types import Receive, Scope, Send

from connections.serving import PLAIN, CallRequest, UpstreamResult, log_level_value

from .peers.asks import PeerAsks
from .peers.calls import Peer, PeerCalls

__all__ = [
    "QUEUED",
    "JsonAnswer",
    "SseAnswer",
    "call_request",
    "peer_cancelled",
    "peer_of",
    "principal_id",
    "send_accepted",
    "session_header",
    "stream_answer",
    "until_gone",
]

_T = TypeVar("_T")


async def send_accepted(send: Send) -> None:
    """The answer to a cancelled call's still-open POST: 202 and no body. A cancelled request gets no
    JSON-RPC response (MCP basic/utilities/cancellation), and 202 tells the client that none follows."""
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


QUEUED = 1000
"""Notifications waiting for a slow peer at most, per call; past that the oldest is dropped."""

WATCH_AFTER = 0.25
"""Seconds a call runs before its peer's connection is watched for a disconnect."""

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),  # nginx in front: pass each event on as it comes
]


def call_request(peers: PeerCalls, peer: Peer, params: Mapping[str, Any], *, modern: bool) -> CallRequest:
    """What a peer's `tools/call` with `params` (schema-checked) asks for besides the result: its progress
    token and log level (a 2026-07-28 peer's `_meta` key; a handshake peer's `logging/setLevel`)."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if type(token) not in (str, int):
        token = None
    level = meta.get(LOG_LEVEL_META_KEY) if modern and isinstance(meta, Mapping) else None
    if not modern:
        level = peers.level(peer)
    if token is None and log_level_value(level) is None:
        return PLAIN
    return CallRequest(progress_token=token, log_level=level if log_level_value(level) is not None else None)


class JsonAnswer:
    """The channel of a call answered with one JSON body: nothing reaches the peer before the answer, and
    cancelling it cancels the task that runs the call (as asyncio cancels a task: `until_gone`)."""

    __slots__ = ("_passed", "cancelled_by", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.cancelled_by: str | None = None
        """Why the call was cancelled, for the writer's own answer."""
        self._passed: tuple[dict[str, Any], UpstreamResult] | None = None

    def keep(self, result: dict[str, Any], upstream: UpstreamResult) -> None:
        """The executor's `result` for this call came from `upstream` (a pooled session's answer, with its
        bytes where the wire kept them): the writer may splice those bytes (`spliced`)."""
        self._passed = (result, upstream)

    def spliced(
        self, result: dict[str, Any], request_id: str | int, version: str, server_info: Mapping[str, Any]
    ) -> bytes | None:
        """The whole JSON-RPC answer to `request_id`, spliced from the upstream's bytes, when `result` is the
        executor's own (no wrapper replaced it) and the peer speaks the upstream session's `version`; None
        otherwise (then the result is shaped and serialised: `lane._shaped`)."""
        passed, self._passed = self._passed, None  # the writer owns the result now (a large one is let go in pieces)
        if passed is None or passed[0] is not result or passed[1].version != version:
            return None
        return passed[1].answer(request_id, server_info=server_info)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        return None

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise MCPError(code=mt.INVALID_REQUEST, message=f"{method} cannot reach the caller of this tool call")

    def cancel(self, reason: str) -> None:
        if self.cancelled_by is None:
            self.cancelled_by = reason
        if self.task is not None:
            self.task.cancel()


class SseAnswer(JsonAnswer):
    """The channel of a call answered with `text/event-stream`: each notification, and each question for a
    handshake peer (waiting in `PeerAsks` for its POSTed answer), is an event before the answer."""

    __slots__ = ("_asks", "_principal", "queued", "wake")

    def __init__(self, asks: PeerAsks, principal: str) -> None:
        super().__init__()
        self._asks, self._principal = asks, principal
        self.queued: deque[bytes] = deque()
        self.wake = anyio.Event()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        if len(self.queued) >= QUEUED:  # a peer that reads slower than the upstream talks loses the oldest
            self.queued.popleft()
        self.queued.append(_event({"jsonrpc": "2.0", "method": method, "params": params}))
        self.wake.set()

    def _write(self, request: dict[str, Any]) -> None:  # in order with the notifications
        self.queued.append(_event(request))
        self.wake.set()

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._asks.ask(self._principal, self._write, method, params, call=self)

    def ended(self) -> None:
        """The answer is written (or abandoned): the questions still waiting for the peer end now."""
        self._asks.ended(self)


def peer_cancelled(peers: PeerCalls, peer: Peer, params: Any) -> None:
    """A peer's `notifications/cancelled`: cancel its call, if in flight (a late or unknown one is ignored)."""
    if isinstance(params, Mapping):
        request_id = params.get("requestId")
        if type(request_id) in (str, int):
            peers.cancel(peer, request_id, "the peer cancelled the request")


def principal_id(scope: Any) -> str:
    """The id of the principal the auth chain admitted (`anonymous` where none ran)."""
    principal = scope.get("state", {}).get("principal")
    return getattr(principal, "id", None) or "anonymous"


def session_header(scope: Scope) -> str | None:
    """The request's `Mcp-Session-Id`, if any."""
    for key, value in scope["headers"]:
        if key == b"mcp-session-id":
            return value.decode("latin-1")
    return None


def peer_of(scope: Scope, *, modern: bool = False) -> Peer:
    """Who sent the request (`mcp/peers/calls.py`): its principal, and at the handshake versions its `Mcp-Session-Id`
    (a 2026-07-28 peer has no session: a stray header is not one)."""
    return principal_id(scope), None if modern else session_header(scope)


async def _watch(receive: Receive, cancel: Callable[[str], None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            cancel("the peer closed the connection")
            return


async def until_gone(
    receive: Receive, peers: PeerCalls, peer: Peer, request_id: Any, call: Awaitable[_T], channel: JsonAnswer
) -> _T | None:
    """`call`'s value; None when the peer cancelled it or went away first (`channel.cancelled_by` says which).

    Every lane call comes through here, so it is kept cheap (`bench/bench_gateway_ab.py`): the call is
    cancelled as asyncio cancels a task (`context.cancel` cancels this task; `asyncio.timeout` works
    the same way: `channel.cancel`), not in an anyio cancel scope, and the POST's connection is watched only once the
    call has run `WATCH_AFTER` seconds (asking uvicorn for the next ASGI message costs it a read
    resume); a peer that left earlier is noticed then."""
    task = asyncio.current_task()
    assert task is not None
    channel.task = task
    cancel = channel.cancel
    key = peers.started(peer, request_id, cancel)
    loop = task.get_loop()
    watching: list[asyncio.Task[None]] = []
    timer = loop.call_later(WATCH_AFTER, _start_watch, loop, receive, cancel, watching)
    try:
        return await call
    except asyncio.CancelledError:
        if channel.cancelled_by is None or task.uncancel() > 0:
            raise  # not (only) ours: the server is stopping
        return None
    finally:
        channel.task = None  # a late cancel() cancels nothing
        timer.cancel()
        if watching:
            watching[0].cancel()
        peers.finished(key, cancel)


def _start_watch(
    loop: asyncio.AbstractEventLoop, receive: Receive, cancel: Callable[[str], None], watching: list[asyncio.Task[None]]
) -> None:
    watching.append(loop.create_task(_watch(receive, cancel)))


def _event(payload: dict[str, Any]) -> bytes:
    return b"event: message\ndata: " + pydantic_core.to_json(payload) + b"\n\n"


async def stream_answer(
    send: Send,
    receive: Receive,
    peers: PeerCalls,
    peer: Peer,
    request_id: Any,
    channel: SseAnswer,
    answer: Callable[[], Awaitable[dict[str, Any]]],
) -> None:
    """Answer with an SSE stream: what `channel` collects while `answer()` runs, then its payload.

    `answer()` runs the call (the executor, with `channel`) and returns the JSON-RPC answer (result or
    error). A call the peer cancelled ends the stream without an answer; the questions it still has
    waiting for the peer end with it."""
    outcome: list[dict[str, Any] | None] = []

    async def run() -> None:
        try:
            outcome.append(await until_gone(receive, peers, peer, request_id, answer(), channel))
        finally:
            channel.wake.set()

    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            queued = channel.queued
            while not outcome:
                await channel.wake.wait()
                channel.wake = anyio.Event()
                while queued:
                    await send({"type": "http.response.body", "body": queued.popleft(), "more_body": True})
    finally:
        channel.ended()
    for event in channel.queued:  # what came in while the answer was being made
        await send({"type": "http.response.body", "body": event, "more_body": True})
    payload = outcome[0]
    last = _event(payload) if payload is not None else b""
    await send({"type": "http.response.body", "body": last, "more_body": False})
