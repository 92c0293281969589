"""`host.mcp.call_tool(..., on_progress=..., on_log=...)`: host code hears what the upstream says about its call.

The callbacks take what an `mcp.Client` callback takes: `on_progress(progress, total, message)` and
`on_log(params)` with the SDK's `LoggingMessageNotificationParams`. They run in a task of their own,
in the order the upstream sent the notifications, and all have run when `call_tool` returns; one
that raises is logged and the call goes on. Up to `QUEUED` notifications wait for a slow callback;
past that the oldest is dropped (a log line says so), so a chatty upstream cannot hold the call.
Cancelling the task that awaits `call_tool` cancels the upstream call (it sees `notifications/cancelled`
with its own request id, or, at 2026-07-28, its POST closed), as a timeout does.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as mt
from mcp_types import LoggingLevel

from .._call_context import CallContext, CallRequest, NotificationsOnly, calling, current_call

__all__ = ["QUEUED", "LogCallback", "ProgressCallback", "with_notices"]

logger = logging.getLogger(__name__)

QUEUED = 1000
"""Notifications waiting for a slow callback at most; the oldest goes first past that."""

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
LogCallback = Callable[[mt.LoggingMessageNotificationParams], Awaitable[None]]


def _fields(request: CallRequest) -> dict[str, Any]:
    return {"progress_token": request.progress_token, "log_level": request.log_level}


@asynccontextmanager
async def with_notices(
    on_progress: ProgressCallback | None, on_log: LogCallback | None, log_level: LoggingLevel
) -> AsyncGenerator[CallContext]:
    """Run the block's call with a context whose notifications go to these callbacks (module docstring)."""
    waiting: deque[tuple[str, dict[str, Any]]] = deque()
    wake = anyio.Event()
    done = False

    def sink(method: str, params: dict[str, Any]) -> None:
        if len(waiting) >= QUEUED:
            waiting.popleft()
            logger.warning("host.mcp: a callback is slow; dropped the oldest queued notification")
        waiting.append((method, params))
        wake.set()

    async def deliver() -> None:
        nonlocal wake
        while True:
            while waiting:
                method, params = waiting.popleft()
                try:
                    if method == "notifications/progress" and on_progress is not None:
                        await on_progress(float(params["progress"]), params.get("total"), params.get("message"))
                    elif method == "notifications/message" and on_log is not None:
                        await on_log(mt.LoggingMessageNotificationParams.model_validate(params))
                except Exception:
                    logger.exception("host.mcp: the %s callback raised", method)
            if done:
                return
            await wake.wait()
            wake = anyio.Event()

    outer = current_call()
    asked = CallRequest(
        progress_token="host" if on_progress is not None else None, log_level=log_level if on_log is not None else None
    )
    channel = NotificationsOnly(sink)
    if outer is None:
        context = CallContext(asked, channel)
    else:
        context = replace(outer, request=replace(outer.request, **_fields(asked)), channel=channel)
    async with anyio.create_task_group() as tg:
        tg.start_soon(deliver)
        try:
            with calling(context):
                yield context
        finally:
            done = True
            wake.set()
