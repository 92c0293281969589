"""`RequestIds`: every HTTP request gets an id, answered in `X-Request-Id`, carried on every log line
the request causes (a context variable that `gateway.logs` reads), and written into error bodies.

Pure ASGI middleware, outermost, so even the auth chain's refusals carry the id. An incoming
`X-Request-Id` (from nginx's `$request_id`, or a client tracing its own calls) is kept when it is a
short token (`[A-Za-z0-9._:-]{1,128}`); anything else is replaced by a new `req_<16 hex>`.

Error bodies: an answer with status 400 or more and a JSON body gets the id added where its shape
has room: `{"ok": false, "error": ..., "requestId": ...}`, and a JSON-RPC error's `data.requestId`.
Only those answers are held until complete (they are small); every other answer streams through.
A JSON-RPC error sent with status 200 (an MCP tool listing that failed closed) carries the id in
the header only.
"""

from __future__ import annotations

import contextvars
import json
import re
import secrets
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["REQUEST_ID_HEADER", "RequestIds", "current_request_id"]

REQUEST_ID_HEADER = "X-Request-Id"
_HEADER = b"x-request-id"
_VALID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_MAX_HELD = 256 * 1024
"""An error body larger than this is passed on as is (no id inside); ours are far smaller."""

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_sdk_request_id", default=None)

Refusal = Callable[[int, str], None]
"""Called with (status, error code) for each 401, 403 and 421 answer (the auth chain's refusals)."""


def current_request_id() -> str | None:
    """The id of the request this code runs for (turns and tool calls started by it inherit it), or None."""
    return _current.get()


def _incoming(scope: Scope) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == _HEADER:
            return value.decode("ascii") if _VALID.fullmatch(value) else None
    return None


def _with_id(body: bytes, request_id: str) -> tuple[bytes, str | None]:
    """The body with the id put in, and the error code it names (None when it is not our JSON shape)."""
    try:
        doc: Any = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body, None
    if not isinstance(doc, dict):
        return body, None
    code: str | None = None
    if doc.get("ok") is False and "error" in doc:
        doc["requestId"] = request_id
        code = str(doc["error"])
    elif isinstance(error := doc.get("error"), dict) and "jsonrpc" in doc:
        data = error.setdefault("data", {})
        if not isinstance(data, dict):
            return body, None
        data["requestId"] = request_id
        code = str(data.get("error", error.get("code")))
    else:
        return body, None
    return json.dumps(doc).encode(), code


class RequestIds:
    """Give each HTTP request an id (see the module docstring); `on_refusal` counts auth refusals."""

    def __init__(self, app: ASGIApp, *, on_refusal: Refusal | None = None) -> None:
        self.app = app
        self.on_refusal = on_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming(scope) or f"req_{secrets.token_hex(8)}"
        scope.setdefault("state", {})["request_id"] = request_id
        token = _current.set(request_id)
        header = (_HEADER, request_id.encode("ascii"))
        held: Message | None = None
        chunks: list[bytes] = []

        async def tagged(message: Message) -> None:
            nonlocal held
            kind = message["type"]
            if kind == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
                if message["status"] < 400:
                    await send(message)
                else:
                    held = message
                return
            if held is None or kind != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            size = sum(len(c) for c in chunks)
            if message.get("more_body", False) and size <= _MAX_HELD:
                return
            await self._flush(held, b"".join(chunks), message.get("more_body", False), request_id, send)
            held = None
            chunks.clear()

        try:
            await self.app(scope, receive, tagged)
        finally:
            _current.reset(token)

    async def _flush(self, start: Message, body: bytes, more: bool, request_id: str, send: Send) -> None:
        status: int = start["status"]
        headers: list[tuple[bytes, bytes]] = list(start["headers"])
        json_body = any(k.lower() == b"content-type" and v.startswith(b"application/json") for k, v in headers)
        code: str | None = None
        if json_body and not more:
            body, code = _with_id(body, request_id)
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
        if self.on_refusal is not None and status in (401, 403, 421):
            self.on_refusal(status, code or "unknown")
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": more})
