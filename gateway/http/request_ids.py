"""`RequestIds`: every HTTP request gets an id, answered in `X-Request-Id`, carried on every log line
the request causes (a context variable that `gateway.logs` reads), and written into error bodies.

Pure ASGI middleware, outermost (before the request guard), so even a refused request gets an id
and a log line. An incoming `X-Request-Id` (from nginx's `$request_id`, or a client tracing its own
calls) is kept when it is a short token (`[A-Za-z0-9._:-]{1,128}`); anything else is replaced by a
new `req_<16 hex>`.

The id in audit records and pending approvals is the gateway's own (`own_request_id`): the request's
id when the gateway made it, else one made for them, with the peer's value beside it
(`peer_request_id`, `peerRequestId`), so a peer cannot forge the field that correlates them. What is
known of the peer (`peer_facts`: its `User-Agent`, a digest of its `Mcp-Session-Id`, the `clientInfo` a call
names, `note_client`) is read for approvals only, from the same one pass over the headers.

Error bodies: the error writers of `_asgi` (the one place error bodies are shaped) ask
`note_error` for the id and put it in: `{"ok": false, "error": ..., "requestId": ...}`, or a
JSON-RPC error's `data.requestId`. Answers stream through untouched. A JSON-RPC error sent with
status 200 (an MCP tool listing that failed closed) carries the id in the header only.
"""

from __future__ import annotations

import contextvars
import hashlib
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "REQUEST_ID_HEADER",
    "RequestIds",
    "current_request_id",
    "note_client",
    "note_error",
    "own_request_id",
    "peer_facts",
    "peer_request_id",
]

REQUEST_ID_HEADER = "X-Request-Id"
_HEADER = b"x-request-id"
_VALID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_REFUSALS = (401, 403, 421)


@dataclass(slots=True)
class _Request:
    id: str
    error: str | None = None
    """The code of the error body written for it, if any (`note_error`)."""
    peer: str | None = None
    """The peer's own `X-Request-Id`, when it sent a valid one (then `id` is that value)."""
    own: str | None = None
    """The gateway's own id when the peer brought one (made when first asked for)."""
    agent: bytes | None = None
    session: bytes | None = None
    client: str | None = None


_current: contextvars.ContextVar[_Request | None] = contextvars.ContextVar("agent_sdk_request", default=None)

Refusal = Callable[[int, str], None]
"""Called with (status, error code) for each 401, 403 and 421 answer (the auth chain's refusals)."""


def current_request_id() -> str | None:
    """The id of the request this code runs for (turns and tool calls started by it inherit it), or None."""
    current = _current.get()
    return current.id if current is not None else None


def own_request_id() -> str | None:
    """The gateway's own id of the current request (never the peer's), for audit records and approvals."""
    current = _current.get()
    if current is None:
        return None
    if current.peer is None:
        return current.id
    if current.own is None:
        current.own = f"req_{secrets.token_hex(8)}"
    return current.own


def peer_request_id() -> str | None:
    """The `X-Request-Id` the peer sent with the current request, if valid (`peerRequestId`)."""
    current = _current.get()
    return current.peer if current is not None else None


def note_client(info: object) -> None:
    """Remember the `clientInfo` (`{name, version}`) the current request names, for `peer_facts`."""
    current = _current.get()
    if current is not None and isinstance(info, dict):
        name, version = info.get("name"), info.get("version")
        if isinstance(name, str):
            current.client = f"{name} {version}" if isinstance(version, str) else name


def peer_facts() -> dict[str, str]:
    """What is known of the peer behind the current request: `client` (its clientInfo), `userAgent`, `session`
    (a digest of its `Mcp-Session-Id`)."""
    current = _current.get()
    if current is None:
        return {}
    # The session id is the peer's handle on its session (sealed, principal-bound): shown by a digest only.
    session = "sha256:" + hashlib.sha256(current.session).hexdigest()[:12] if current.session else None
    facts = {"client": current.client, "userAgent": current.agent, "session": session}
    return {k: (v.decode("latin-1") if isinstance(v, bytes) else v)[:200] for k, v in facts.items() if v}


def note_error(code: str) -> str | None:
    """For the error writers: remember `code` as the request's error (to count a refusal by it) and
    return the request's id to put in the body, or None outside a request."""
    current = _current.get()
    if current is None:
        return None
    current.error = code
    return current.id


def _incoming(scope: Scope) -> _Request:
    peer = agent = session = None
    seen = False
    for key, value in scope.get("headers", ()):
        if key == _HEADER:
            if not seen:  # the first one decides
                seen = True
                peer = value.decode("ascii") if _VALID.fullmatch(value) else None
        elif key == b"user-agent":
            agent = value
        elif key == b"mcp-session-id":
            session = value
    request = _Request(peer or f"req_{secrets.token_hex(8)}", peer=peer)
    request.agent, request.session = agent, session
    return request


class RequestIds:
    """Give each HTTP request an id (see the module docstring); `on_refusal` counts auth refusals."""

    def __init__(self, app: ASGIApp, *, on_refusal: Refusal | None = None) -> None:
        self.app = app
        self.on_refusal = on_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        current = _incoming(scope)
        scope.setdefault("state", {})["request_id"] = current.id
        token = _current.set(current)
        header = (_HEADER, current.id.encode("ascii"))
        on_refusal = self.on_refusal

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
                if on_refusal is not None and message["status"] in _REFUSALS:
                    on_refusal(message["status"], current.error or "unknown")
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            _current.reset(token)
