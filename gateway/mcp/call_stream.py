"""A peer's `tools/call` on `/v1/mcp/tools` while it runs: cancelled when the peer goes, streamed when asked.

The lane (`gateway/mcp/lane.py`) runs every `tools/call` through `until_gone`: the call is registered in
the runtime's `PeerCalls` under the peer (its principal and, at the handshake versions, its
`Mcp-Session-Id`: `peer_of`) and its request id (so its `notifications/cancelled` finds it), and is
cancelled when the POST's connection closes. A
cancelled call cancels the upstream call under it, which then sees `notifications/cancelled` with
its own request id (handshake era) or its own POST closed (2026-07-28), as for a timeout.

Only a call whose request asks for something besides the result (a `progressToken`, or a log level:
`io.modelcontextprotocol/logLevel` in `_meta` at 2026-07-28, the peer's `logging/setLevel` at
the handshake versions) is answered with `text/event-stream`: its upstream's notifications about
it, then the answer, each an SSE `message` event (`stream_answer`). Every other call keeps the plain
JSON answer, the hot path.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import pydantic_core
from mcp_types import LOG_LEVEL_META_KEY
from starlette.types import Receive, Scope, Send

from connections.serving import CallContext, calling, log_level_value

from ..runtime import Runtime
from .peers.calls import Peer, PeerCalls

__all__ = [
    "QUEUED",
    "call_context",
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


def call_context(runtime: Runtime, peer: Peer, params: Mapping[str, Any], *, modern: bool) -> CallContext:
    """The context of a peer's `tools/call` with `params` (schema-checked): its progress token and log
    level; a `sink` is set (by `stream_answer`) only when it asks for either."""
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if type(token) not in (str, int):
        token = None
    level = meta.get(LOG_LEVEL_META_KEY) if modern and isinstance(meta, Mapping) else None
    if not modern:
        level = runtime.peers.level(peer)
    context = CallContext(progress_token=token, log_level=level if log_level_value(level) is not None else None)
    if context.progress_token is not None or context.log_level is not None:
        context.sink = _unset_sink
    return context


def _unset_sink(method: str, params: dict[str, Any]) -> None:  # pragma: no cover - replaced by stream_answer
    raise AssertionError("the call's sink is set by stream_answer")


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
    receive: Receive, peers: PeerCalls, peer: Peer, request_id: Any, call: Awaitable[_T], context: CallContext
) -> _T | None:
    """`call`'s value; None when the peer cancelled it or went away first (`context.cancelled_by` says which).

    Every lane call comes through here, so it is kept cheap (`bench/bench_gateway_ab.py`): the call is
    cancelled as asyncio cancels a task (`context.cancel` cancels this task; `asyncio.timeout` works
    the same way), not in an anyio cancel scope, and the POST's connection is watched only once the
    call has run `WATCH_AFTER` seconds (asking uvicorn for the next ASGI message costs it a read
    resume); a peer that left earlier is noticed then."""
    task = asyncio.current_task()
    assert task is not None
    context.scope = task
    cancel = context.cancel
    key = peers.started(peer, request_id, cancel)
    loop = task.get_loop()
    watching: list[asyncio.Task[None]] = []
    timer = loop.call_later(WATCH_AFTER, _start_watch, loop, receive, cancel, watching)
    try:
        return await call
    except asyncio.CancelledError:
        if context.cancelled_by is None or task.uncancel() > 0:
            raise  # not (only) ours: the server is stopping
        return None
    finally:
        context.scope = None  # a late cancel() cancels nothing
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
    context: CallContext,
    answer: Callable[[], Awaitable[dict[str, Any]]],
) -> None:
    """Answer with an SSE stream: the notifications `context` collects while `answer()` runs, then its payload.

    `answer()` runs the call with `context` current (`calling`) and returns the JSON-RPC answer
    (result or error). A call the peer cancelled ends the stream without an answer."""
    queued: deque[bytes] = deque()
    wake = anyio.Event()

    def sink(method: str, params: dict[str, Any]) -> None:
        if len(queued) >= QUEUED:  # a peer that reads slower than the upstream talks loses the oldest
            queued.popleft()
        queued.append(_event({"jsonrpc": "2.0", "method": method, "params": params}))
        wake.set()

    def ask(request: dict[str, Any]) -> None:  # a question for the peer (mcp/peers/asks.py), in order with the rest
        nonlocal wake
        queued.append(_event(request))
        wake.set()

    context.sink = sink
    context.asker = ask
    outcome: list[dict[str, Any] | None] = []

    async def run() -> None:
        nonlocal wake
        try:
            with calling(context):
                outcome.append(await until_gone(receive, peers, peer, request_id, answer(), context))
        finally:
            wake.set()

    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        while not outcome:
            await wake.wait()
            wake = anyio.Event()
            while queued:
                await send({"type": "http.response.body", "body": queued.popleft(), "more_body": True})
    for event in queued:  # what came in while the answer was being made
        await send({"type": "http.response.body", "body": event, "more_body": True})
    payload = outcome[0]
    last = _event(payload) if payload is not None else b""
    await send({"type": "http.response.body", "body": last, "more_body": False})
