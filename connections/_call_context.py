"""`CallContext`: what one `tools/call` carries besides its arguments, from the caller to the wire and back.

A caller (the `/v1/mcp/tools` lane for a peer, `host.mcp.call_tool` for host code) builds one per
call and runs the call inside `calling(context)`. Every layer below reads it from `current_call()`
instead of growing a parameter: `TurnTool.call`, `Broker`, `ClientPool.call_tool`,
`AccountConnections`, `call_tool_json` and whichever wire serves the call (the fast wire of
`connections/client/_fast_calls.py`, the SDK's dispatcher for stdio, SSE and the SDK transport). The pool's hot path
pays one `ContextVar.get()` when no context is set.

What it holds:

- `progress_token`: the caller's own `progressToken` (None: the caller asked for no progress).
  The upstream request carries a token of the wire's choosing (its request id, as the SDK does);
  `progress()` rewrites each upstream `notifications/progress` to the caller's token.
- `log_level`: the least severe level the caller wants (`logging/setLevel` or the 2026-07-28
  `_meta` key `io.modelcontextprotocol/logLevel`); None: no `notifications/message` for this call.
  `log()` drops messages below it, and below the connection's `min_log_level` cap.
- `sink`: where the notifications for this call go, as `(method, params)`. It is called
  synchronously (from the wire's reader, in receive order) and must not block: the lane queues
  what it gets and writes it on the POST's SSE answer; `host.mcp` queues it for the host's callbacks.
- `cancel()`: the caller's cancellation hook. The caller runs the call inside `scope` (an anyio
  `CancelScope`, or its own asyncio task, as the lane does); cancelling it cancels the upstream
  call, which then sees `notifications/cancelled` with its own request id (a handshake-era
  upstream) or its POST closed (2026-07-28), as for a timeout.

- `elicitation`, `sampling`: the caller's handlers for an upstream's mid-call requests
  (`connections/client/_input_requests.py`); None: the caller cannot answer them, and the upstream is told so.
- `pass_input_required`: the caller speaks 2026-07-28 itself (a modern peer), so a modern upstream's
  `InputRequiredResult` goes back to it instead of being driven here; `input_responses` and
  `request_state` are that peer's retry, forwarded to the upstream.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from mcp_types import LoggingLevel

__all__ = [
    "LOG_LEVELS",
    "CallContext",
    "Cancellable",
    "InputHandler",
    "NotificationSink",
    "calling",
    "current_call",
    "log_level_value",
]

LOG_LEVELS: Final[tuple[LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
"""RFC 5424 severities as MCP names them, least severe first (MCP server/utilities/logging)."""

_SEVERITY: Final[dict[str, int]] = {name: i for i, name in enumerate(LOG_LEVELS)}

InputHandler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers one upstream input request's params (`elicitation/create`, `sampling/createMessage`) with its
result as JSON; raises `MCPError` to refuse it (the upstream gets that error)."""


class Cancellable(Protocol):
    """An anyio `CancelScope` or an asyncio `Task`: what `CallContext.cancel` cancels."""

    def cancel(self) -> object: ...


NotificationSink = Callable[[str, dict[str, Any]], None]
"""Takes one notification for the caller, `(method, params)`; synchronous, never blocks."""


def log_level_value(level: object) -> int | None:
    """`level`'s rank in `LOG_LEVELS` (0 for debug), or None when it is not a level name."""
    return _SEVERITY.get(level) if isinstance(level, str) else None


@dataclass(slots=True, eq=False)
class CallContext:
    """One call's progress token, log level, notification sink and cancellation hook (module docstring)."""

    progress_token: str | int | None = None
    log_level: LoggingLevel | None = None
    sink: NotificationSink | None = field(default=None, repr=False)
    scope: Cancellable | None = field(default=None, repr=False)
    """What the caller runs the call in (an anyio `CancelScope`, or the asyncio task itself); `cancel()` cancels it."""
    cancelled_by: str | None = None
    """Why the call was cancelled (`cancel()`'s reason), for the caller's own answer and log."""
    elicitation: InputHandler | None = field(default=None, repr=False)
    sampling: InputHandler | None = field(default=None, repr=False)
    capabilities: dict[str, Any] | None = None
    """The caller's own `elicitation` / `sampling` capability objects, forwarded as declared."""
    pass_input_required: bool = False
    input_responses: dict[str, Any] | None = field(default=None, repr=False)
    request_state: str | None = field(default=None, repr=False)
    asker: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    """Writes one JSON-RPC request to the caller on its answer stream (a handshake peer's SSE answer), as
    `sink` writes notifications; set by whoever streams the answer."""

    @property
    def wants_progress(self) -> bool:
        return self.progress_token is not None and self.sink is not None

    def wants_logs(self, cap: LoggingLevel | None = None) -> LoggingLevel | None:
        """The level to ask the upstream for: the caller's, raised to the connection's cap `cap`; None: none."""
        if self.log_level is None or self.sink is None:
            return None
        if cap is not None and _SEVERITY[cap] > _SEVERITY[self.log_level]:
            return cap
        return self.log_level

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Pass one upstream `notifications/progress` for this call on, under the caller's token."""
        if self.progress_token is None or self.sink is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.sink("notifications/progress", params)

    def log(self, params: Mapping[str, Any], cap: LoggingLevel | None = None) -> bool:
        """Pass one upstream `notifications/message` on if it is at or above the caller's level and `cap`.

        Returns whether it was passed on. A message without a valid level is dropped."""
        wanted = self.wants_logs(cap)
        severity = log_level_value(params.get("level"))
        if wanted is None or severity is None or severity < _SEVERITY[wanted]:
            return False
        assert self.sink is not None
        kept: dict[str, Any] = {"level": params["level"], "data": params.get("data")}
        if isinstance(params.get("logger"), str):
            kept["logger"] = params["logger"]
        self.sink("notifications/message", kept)
        return True

    def cancel(self, reason: str) -> None:
        """Cancel the call (the peer sent `notifications/cancelled`, or went away). Idempotent."""
        if self.cancelled_by is None:
            self.cancelled_by = reason
        if self.scope is not None:
            self.scope.cancel()


_CURRENT: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("agent_sdk_call", default=None)


def current_call() -> CallContext | None:
    """The context of the `tools/call` this task is making, if its caller set one (`calling`)."""
    return _CURRENT.get()


@contextmanager
def calling(context: CallContext | None) -> Generator[CallContext | None]:
    """Run the block's `tools/call` with `context` (None: a plain call, as if no context was ever set)."""
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)
