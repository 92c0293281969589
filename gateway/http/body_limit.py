"""`BodyLimit`: the request body cap (`AGENT_SDK_MAX_BODY_BYTES`, 4 MiB by default), a 413 before the app
reads a byte too many."""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._asgi import header, send_error

__all__ = ["BodyLimit"]


class BodyLimit:
    """413 for a body over `max_bytes`: at once when `Content-Length` says so (nothing is read; a
    declared length within the cap bounds the body, since the server frames it by that length),
    otherwise as soon as the streamed body passes the cap (at most `max_bytes` are buffered)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Like `AuthChain`: a plain function handing back the coroutine to await.
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE"):
            return self.app(scope, receive, send)
        declared = header(scope, b"content-length")
        if declared is None:
            return self._counted(scope, receive, send)
        try:
            size = int(declared)
        except ValueError:
            return send_error(scope, send, 400, "invalid_request", "Content-Length is not a number")
        if size > self.max_bytes:
            return send_error(scope, send, 413, "payload_too_large", f"the body is over {self.max_bytes} bytes")
        # The server reads exactly the declared length as the body (HTTP/1.1 framing): nothing to count.
        return self.app(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A body without a declared length: buffered up to the cap, then replayed to the app."""
        buffered = bytearray()
        pending: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)
                break
            buffered.extend(message.get("body", b""))
            if len(buffered) > self.max_bytes:
                await send_error(scope, send, 413, "payload_too_large", f"the body is over {self.max_bytes} bytes")
                return
            if not message.get("more_body", False):
                break
        replay: list[Message] = [{"type": "http.request", "body": bytes(buffered), "more_body": False}, *pending]

        async def replayed() -> Message:
            if replay:
                return replay.pop(0)
            return await receive()

        await self.app(scope, replayed, send)
