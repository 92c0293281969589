"""The executor's channel when the SDK's own session answers a `tools/call`: `serve --stdio`, and what the
lane leaves to the SDK's manager on `/v1/mcp/tools` (`gateway/mcp/pipeline.py`).

`notify` queues each notification; a task of the call's own writes them on the session in order,
tied to the call's request id (so at 2026-07-28 they ride the call's own stream), and all are
written before the answer. `ask` puts a request to the peer on the same session and waits for its
answer (a handshake-era peer that declared the feature). The SDK cancels the handler itself on the
peer's `notifications/cancelled` (its dispatcher's "interrupt" mode), which cancels the upstream call.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as mt
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, ConfigDict, TypeAdapter

from .call_stream import QUEUED
from .peers.input import INPUT_FEATURES

__all__ = ["SessionAnswer", "declared_at_initialize", "session_answer"]

logger = logging.getLogger(__name__)

_NOTIFICATION: TypeAdapter[Any] = TypeAdapter(mt.ServerNotification)
_REQUEST: TypeAdapter[Any] = TypeAdapter(mt.ServerRequest)


class _Answer(BaseModel):
    """Whatever the peer answered, kept as it came (the SDK checks it against the method's schema first)."""

    model_config = ConfigDict(extra="allow")


class SessionAnswer:
    """`CallChannel` on the SDK's session of one request (module docstring)."""

    __slots__ = ("_ctx", "_queue", "cancelled_by", "scope")

    def __init__(self, ctx: ServerRequestContext[Any, Any], queue: MemoryObjectSendStream[dict[str, Any]]) -> None:
        self._ctx = ctx
        self._queue = queue
        self.scope = anyio.CancelScope()
        self.cancelled_by: str | None = None

    def notify(self, method: str, params: dict[str, Any]) -> None:
        try:
            self._queue.send_nowait({"method": method, "params": params})
        except anyio.WouldBlock:  # a peer that reads slower than the upstream talks: this one is dropped
            logger.warning("a peer reads slowly; dropped a %s for its call", method)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the call has been answered: a late notification has nowhere to go

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self._ctx.session.can_send_request:  # a stateless JSON answer on HTTP: no way back to the peer
            raise MCPError(code=mt.INVALID_REQUEST, message=f"{method} cannot reach the caller of this tool call")
        request = _REQUEST.validate_python({"method": method, "params": params})
        related = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        answer = await self._ctx.session.send_request(request, _Answer, metadata=related)
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    def cancel(self, reason: str) -> None:
        if self.cancelled_by is None:
            self.cancelled_by = reason
        self.scope.cancel()

    async def _forward(self, queued: MemoryObjectReceiveStream[dict[str, Any]]) -> None:
        async with queued:
            async for message in queued:
                try:
                    notification = _NOTIFICATION.validate_python(message)
                    await self._ctx.session.send_notification(notification, related_request_id=self._ctx.request_id)
                except Exception:  # a peer gone, or a notification its version has no schema for: the call goes on
                    logger.debug("could not forward a %s to the peer", message.get("method"), exc_info=True)


@asynccontextmanager
async def session_answer(ctx: ServerRequestContext[Any, Any]) -> AsyncGenerator[SessionAnswer]:
    """A `SessionAnswer` for the block's call; every notification it took is written when the block ends."""
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](QUEUED)
    answer = SessionAnswer(ctx, send)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer._forward, receive)  # pyright: ignore[reportPrivateUsage]
            try:
                with answer.scope:
                    yield answer
            finally:
                send.close()
    except BaseExceptionGroup as group:
        # The task group wraps what the call raised (a refusal's or an upstream's `MCPError`): the SDK would
        # answer the group as code 0 "unhandled errors in a TaskGroup" (-32603 at 2026-07-28), so the peer
        # gets the one error inside, with its own code, sentence and `data`, on every path that answers here.
        raise _sole(group) from None


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups; `exc` itself when it holds more than one."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def declared_at_initialize(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The `elicitation` / `sampling` objects a handshake-era peer declared at `initialize` on this session."""
    capabilities = ctx.session.client_capabilities
    if capabilities is None:
        return {}
    dumped = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {k: v for k in INPUT_FEATURES if isinstance(v := dumped.get(k), dict)}
