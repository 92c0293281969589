"""Handshake-era peers' GET streams and resource subscriptions on `/v1/mcp/tools` (MCP 2025-11-25).

A handshake-era peer holds the sealed `Mcp-Session-Id` the gateway answered its `initialize` with
(`gateway/mcp/peers/sessions.py`). With it, and only for the principal it was sealed for:

- `GET /v1/mcp/tools` opens the session's standalone SSE stream (2025-11-25 transports, "Listening for
  Messages from the Server"). On it go `notifications/{tools,resources,prompts}/list_changed` for what
  this endpoint shows and `notifications/resources/updated` for the URIs the session subscribed to:
  the events of the one relay, `Subscriptions.bus` (`gateway/mcp/subscriptions.py`), which also feeds the
  2026-07-28 peers' `subscriptions/listen` streams. One stream per session: a second GET replaces the
  first (the spec lets a client hold several streams and reconnect; each message goes on one of them).
- `resources/subscribe` / `resources/unsubscribe` add and remove a URI for that session; the upstream
  subscription is held through `Subscriptions.hold`, as for a listen stream.
- `DELETE /v1/mcp/tools` ends the session's stream and its subscriptions.

Without a session id, or with one this deployment did not seal for the caller (forged, expired, another
principal's), a subscription is refused with a JSON-RPC error that says what to do, never `{}`: an answer
that promised updates nothing could carry would be a quiet "less".

What a session holds lives on the replica that serves it (as a held call does): the peer is pinned there
by its session id (docs/deploy.md). Bounds (`gateway/mcp/peers/caps.py`, the same as for listen streams): each
session with a stream or a subscription takes one of its principal's streams (`Subscriptions.streams`,
shared with `subscriptions/listen`), and follows at most `MAX_URIS` URIs; a stream ends when its peer goes
away, and the subscriptions of a session without a stream are let go after `IDLE_S`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import event_to_notification
from starlette.types import Receive, Scope, Send

from connections.serving import canonical_uri

from ...errors import GatewayError
from ...http._asgi import send_error
from ...state.request_state import RequestStates
from ..subscriptions import Subscriptions, viewer
from .caps import MAX_URIS, AtCap

__all__ = ["IDLE_S", "PeerStreams", "StreamRefused", "subscribe_handlers"]

IDLE_S = 600.0
"""How long a session's subscriptions outlive its stream (a peer reconnecting its GET keeps them)."""
_KEEPALIVE_S = 25.0
_BUFFERED = 256
_HOW = (
    "initialize first (its answer carries an Mcp-Session-Id), send that Mcp-Session-Id with this request and "
    "open GET /v1/mcp/tools with it to receive the notifications; a 2026-07-28 peer uses subscriptions/listen"
)


class StreamRefused(GatewayError):
    """A session the gateway will not serve; `status` for HTTP, the message says what to do."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Session:
    principal: str
    held: dict[str, AsyncExitStack] = field(default_factory=dict[str, AsyncExitStack])
    """Each subscribed URI and the upstream subscription it holds."""
    stream: MemoryObjectSendStream[ServerEvent] | None = None
    idle_since: float = 0.0


class PeerStreams:
    """The sessions of handshake-era peers on this replica (module docstring)."""

    def __init__(
        self,
        subscriptions: Subscriptions,
        request_states: RequestStates,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.subscriptions = subscriptions
        """The relay these sessions follow (its `refuse_hidden` decides a subscription)."""
        self._streams = subscriptions.streams
        self._states = request_states
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._lock = anyio.Lock()
        self.close = subscriptions.bus.subscribe(self._deliver)
        """Stop relaying (the app's lifespan calls it at shutdown)."""

    def end_streams(self) -> None:
        """End every open stream (the server is shutting down); the peers reconnect elsewhere."""
        for session in self._sessions.values():
            if session.stream is not None:
                session.stream.close()

    def _deliver(self, event: ServerEvent) -> None:
        for session in list(self._sessions.values()):
            stream = session.stream
            if stream is None or (isinstance(event, ResourceUpdated) and event.uri not in session.held):
                continue
            try:
                stream.send_nowait(event)
            except anyio.WouldBlock:  # a peer that stopped reading: end its stream, it re-reads on reconnect
                stream.close()
            except anyio.ClosedResourceError:
                pass

    def _checked(self, token: str | None, principal: str) -> str:
        if token is None:
            raise StreamRefused(400, f"no Mcp-Session-Id: {_HOW}")
        if not self._states.holds_session(token, principal):
            raise StreamRefused(
                404,
                "this Mcp-Session-Id was not issued by this gateway to this caller, or it expired: initialize again",
            )
        return token

    async def _session(self, token: str, principal: str) -> _Session:
        """The session's record, made if new. Raises `StreamRefused` (429) past the principal's streams."""
        session = self._sessions.get(token)
        if session is not None:
            return session
        await self._sweep()
        session = self._sessions.get(token)  # made while the sweep waited
        if session is not None:
            return session
        try:
            self._streams.take(principal)
        except AtCap as exc:
            raise StreamRefused(exc.status, f"{exc.error.message}, or wait for an idle session to lapse") from None
        session = self._sessions[token] = _Session(principal, idle_since=self._clock())
        return session

    def _drop(self, token: str) -> _Session | None:
        """Forget the session `token`, giving its stream back to its principal."""
        session = self._sessions.pop(token, None)
        if session is not None:
            self._streams.release(session.principal)
        return session

    async def _sweep(self) -> None:
        """Let go of sessions that have had no stream for `IDLE_S`."""
        lapsed = self._clock() - IDLE_S
        for token, session in list(self._sessions.items()):
            if session.stream is None and session.idle_since < lapsed:
                await self._end(token)

    async def _end(self, token: str) -> None:
        session = self._drop(token)
        if session is None:
            return
        if session.stream is not None:
            session.stream.close()
        with anyio.CancelScope(shield=True):
            for held in session.held.values():
                await held.aclose()

    async def subscribe(self, token: str | None, principal: str, uri: str) -> None:
        """`resources/subscribe` for the session `token`. Raises `MCPError`: no or invalid session, a URI no
        advertised connection offers (-32602), or one URI past `MAX_URIS`."""
        async with self._lock:
            try:
                checked = self._checked(token, principal)
                session = await self._session(checked, principal)
            except StreamRefused as exc:
                raise MCPError(mt.INVALID_REQUEST, f"resources/subscribe refused: {exc}") from None
            if uri in session.held:
                return
            _check_room(session)
        # The upstream subscription is made outside the lock: a slow upstream holds up only its own peer.
        held = AsyncExitStack()
        try:
            await self.subscriptions.hold([uri], principal, held)
        except BaseException:
            if not session.held and session.stream is None and self._sessions.get(checked) is session:
                self._drop(checked)  # made for this subscribe: gone with it
            raise
        async with self._lock:
            room = len(session.held) < MAX_URIS  # another subscribe may have taken the last place
            kept = room and self._sessions.get(checked) is session and uri not in session.held
            if kept:
                session.held[uri] = held
        if not kept:  # subscribed meanwhile, no room left, or the session was ended (DELETE)
            with anyio.CancelScope(shield=True):
                await held.aclose()
            _check_room(session)

    async def unsubscribe(self, token: str | None, principal: str, uri: str) -> None:
        """`resources/unsubscribe` for the session `token`; raises `MCPError` as `subscribe` does."""
        async with self._lock:
            try:
                checked = self._checked(token, principal)
            except StreamRefused as exc:
                raise MCPError(mt.INVALID_REQUEST, f"resources/unsubscribe refused: {exc}") from None
            await self.subscriptions.owner(uri, principal)
            session = self._sessions.get(checked)
            held = session.held.pop(uri, None) if session is not None else None
        if held is not None:
            with anyio.CancelScope(shield=True):
                await held.aclose()

    async def delete(self, token: str | None, principal: str) -> None:
        """`DELETE`: end the session's stream and subscriptions. Raises `StreamRefused`."""
        async with self._lock:
            await self._end(self._checked(token, principal))

    async def serve(self, scope: Scope, receive: Receive, send: Send, token: str | None, principal: str) -> None:
        """`GET`: the session's SSE stream, until the peer goes away, a later GET replaces it, or DELETE."""
        accept = dict(scope["headers"]).get(b"accept", b"").decode("latin-1")
        if "text/event-stream" not in accept:
            await send_error(scope, send, 406, "not_acceptable", "the GET stream is text/event-stream: accept it")
            return
        async with self._lock:
            try:
                session = await self._session(self._checked(token, principal), principal)
            except StreamRefused as exc:
                await send_error(scope, send, exc.status, "session_refused", str(exc))
                return
            if session.stream is not None:
                session.stream.close()  # the newest stream wins (a reconnecting peer)
            events_in, events = anyio.create_memory_object_stream[ServerEvent](_BUFFERED)
            session.stream = events_in
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream"),
                        (b"cache-control", b"no-store"),
                        (b"x-accel-buffering", b"no"),  # nginx: pass each event on as it comes
                    ],
                }
            )
            async with anyio.create_task_group() as tg, events:

                async def until_gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_gone)
                await _relay(events, send)
                tg.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            events_in.close()
            if session.stream is events_in:
                session.stream = None
                session.idle_since = self._clock()
                if not session.held and token is not None and self._sessions.get(token) is session:
                    self._drop(token)


def _check_room(session: _Session) -> None:
    if len(session.held) >= MAX_URIS:
        raise AtCap(
            f"resources/subscribe refused: this session already follows {MAX_URIS} resources; unsubscribe one first"
        )


async def _relay(events: Any, send: Send) -> None:
    """Each event as an SSE `message` (a JSON-RPC notification), a comment when idle, until `events` closes."""
    while True:
        event: ServerEvent | None = None
        with anyio.move_on_after(_KEEPALIVE_S):
            try:
                event = await events.receive()
            except anyio.EndOfStream:
                return
        await send({"type": "http.response.body", "body": _frame(event), "more_body": True})


def _frame(event: ServerEvent | None) -> bytes:
    if event is None:
        return b": keep-alive\n\n"  # lets a proxy, and the peer, see the stream is alive
    notification = event_to_notification(event, {}).model_dump(by_alias=True, mode="json", exclude_none=True)
    params = notification.get("params")
    if isinstance(params, dict) and not params.get("_meta"):
        params.pop("_meta", None)
        if not params:
            notification.pop("params")
    return f"event: message\ndata: {json.dumps({'jsonrpc': '2.0', **notification}, separators=(',', ':'))}\n\n".encode()


def subscribe_handlers(runtime_for: Callable[[ServerRequestContext[Any, Any]], Any]) -> dict[str, Any]:
    """The `Server(...)` handlers of `resources/subscribe` and `resources/unsubscribe`."""

    def streams_and_caller(ctx: ServerRequestContext[Any, Any]) -> tuple[PeerStreams, str | None, str]:
        streams: PeerStreams | None = runtime_for(ctx).streams
        if streams is None:  # the server was built with the handlers, so the runtime has them
            raise MCPError(mt.INTERNAL_ERROR, "subscriptions are not set up on this gateway")
        request: Any = ctx.request
        token = request.headers.get("mcp-session-id") if request is not None else None
        return streams, token, viewer(ctx)

    async def subscribe(ctx: ServerRequestContext[Any, Any], params: mt.SubscribeRequestParams) -> Any:
        streams, token, principal = streams_and_caller(ctx)
        uri = canonical_uri(str(params.uri))  # decided, held and matched against updates in canonical form
        await streams.subscriptions.refuse_hidden(runtime_for(ctx).policy, ctx, [uri])  # as one nobody offers
        await streams.subscribe(token, principal, uri)
        return {}

    async def unsubscribe(ctx: ServerRequestContext[Any, Any], params: mt.UnsubscribeRequestParams) -> Any:
        streams, token, principal = streams_and_caller(ctx)
        uri = canonical_uri(str(params.uri))
        # One the caller could not have subscribed is answered as one no connection offers (as `owner` answers
        # a missing one), so that unsubscribing tells no more than subscribing.
        await streams.subscriptions.refuse_hidden(runtime_for(ctx).policy, ctx, [uri])
        await streams.unsubscribe(token, principal, uri)
        return {}

    return {"on_subscribe_resource": subscribe, "on_unsubscribe_resource": unsubscribe}
