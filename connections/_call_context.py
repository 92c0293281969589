"""`CallContext`: what one `tools/call` carries besides its arguments, from the caller to the wire and back.

A caller (the gateway's executor for a peer, `gateway/mcp/pipeline.py`; `host.mcp.call_tool` for host
code) builds one per call and runs the call inside `calling(context)`. Every layer below reads it from
`current_call()` instead of growing a parameter: `TurnTool.call`, `Broker`, `ClientPool.call_tool`,
`AccountConnections`, `call_tool_json` and whichever wire serves the call (the fast wire of
`connections/client/_fast_calls.py`, the SDK's dispatcher for stdio, SSE and the SDK transport). The
pool's hot path pays one `ContextVar.get()` when no context is set.

A context is two things:

- `request`, a frozen `CallRequest`: what the caller asked for, fixed before the call starts.
  - `progress_token`: the caller's own `progressToken` (None: no progress). The upstream request
    carries a token of the wire's choosing (its request id, as the SDK does); `progress()` rewrites
    each upstream `notifications/progress` to the caller's token.
  - `log_level`: the least severe level the caller wants (`logging/setLevel` or the 2026-07-28
    `_meta` key `io.modelcontextprotocol/logLevel`); None: no `notifications/message` for this call.
    `log()` drops messages below it, and below the connection's `min_log_level` cap.
  - `capabilities`: the caller's own `elicitation` / `sampling` capability objects, forwarded as declared.
  - `pass_input_required`: the caller speaks 2026-07-28 itself (a modern peer), so a modern upstream's
    `InputRequiredResult` goes back to it instead of being driven here; `input_responses` and
    `request_state` are that peer's retry, forwarded to the upstream.
- `channel`, a `CallChannel`: the way back to the caller, implemented once by each answer writer
  (a JSON answer, an SSE answer, the SDK's session for `serve --stdio`, `host.mcp`'s callbacks):
  `notify` takes one notification (synchronous, from the wire's reader, in receive order: it must
  not block), `ask` puts one request to the caller and waits for its answer, `cancel` ends the call
  (the caller sent `notifications/cancelled`, or went away); the upstream call under it is
  cancelled and sees `notifications/cancelled` with its own request id (a handshake-era upstream)
  or its POST closed (2026-07-28), as for a timeout.

`elicitation` and `sampling` are the handlers the wire calls for an upstream's mid-call requests
(`connections/client/_input_requests.py`); None: the caller cannot answer them, and the upstream is
told so. They are set from the request's capabilities and the channel (or, for a 2026-07-28 peer's
held call, by `gateway/mcp/peers/held.py`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import LoggingLevel

__all__ = [
    "LOG_LEVELS",
    "PLAIN",
    "CallChannel",
    "CallContext",
    "CallRequest",
    "InputHandler",
    "NotificationSink",
    "NotificationsOnly",
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


NotificationSink = Callable[[str, dict[str, Any]], None]
"""Takes one notification for the caller, `(method, params)`; synchronous, never blocks."""


class CallChannel(Protocol):
    """The way back to a call's caller (module docstring); each answer writer implements it once."""

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Write one notification about the call to the caller. Synchronous, never blocks."""
        ...

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Put one request (`elicitation/create`, `sampling/createMessage`) to the caller and return its
        result. Raises `MCPError`: the caller's own error, or that it cannot be asked."""
        ...

    def cancel(self, reason: str) -> None:
        """End the call for `reason` (the caller cancelled it, or went away). Idempotent."""
        ...


class NotificationsOnly:
    """A channel that takes notifications only (`sink`): nothing can ask its caller, and its caller cancels
    by cancelling the task that awaits the call (`host.mcp`, `agent-sdk mcp call`)."""

    __slots__ = ("_sink",)

    def __init__(self, sink: NotificationSink) -> None:
        self._sink = sink

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._sink(method, params)

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise MCPError(code=mt.INVALID_REQUEST, message=f"{method} cannot reach the caller of this tool call")

    def cancel(self, reason: str) -> None:
        return None


def log_level_value(level: object) -> int | None:
    """`level`'s rank in `LOG_LEVELS` (0 for debug), or None when it is not a level name."""
    return _SEVERITY.get(level) if isinstance(level, str) else None


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What the caller asked for, fixed before the call starts (module docstring)."""

    progress_token: str | int | None = None
    log_level: LoggingLevel | None = None
    capabilities: Mapping[str, Any] | None = None
    """The caller's own `elicitation` / `sampling` capability objects, forwarded as declared."""
    pass_input_required: bool = False
    input_responses: dict[str, Any] | None = field(default=None, repr=False)
    request_state: str | None = field(default=None, repr=False)


PLAIN: Final = CallRequest()
"""A request that asks for nothing besides the result."""


@dataclass(slots=True, eq=False)
class CallContext:
    """One call's frozen `request`, its `channel` back to the caller and its input handlers (module docstring)."""

    request: CallRequest = PLAIN
    channel: CallChannel | None = field(default=None, repr=False)
    """None: nothing goes back to the caller but the result (no notification, no question, no cancel)."""
    elicitation: InputHandler | None = field(default=None, repr=False)
    sampling: InputHandler | None = field(default=None, repr=False)

    @property
    def progress_token(self) -> str | int | None:
        return self.request.progress_token

    @property
    def log_level(self) -> LoggingLevel | None:
        return self.request.log_level

    @property
    def capabilities(self) -> Mapping[str, Any] | None:
        return self.request.capabilities

    @property
    def pass_input_required(self) -> bool:
        return self.request.pass_input_required

    @property
    def input_responses(self) -> dict[str, Any] | None:
        return self.request.input_responses

    @property
    def request_state(self) -> str | None:
        return self.request.request_state

    @property
    def wants_progress(self) -> bool:
        return self.request.progress_token is not None and self.channel is not None

    def wants_logs(self, cap: LoggingLevel | None = None) -> LoggingLevel | None:
        """The level to ask the upstream for: the caller's, raised to the connection's cap `cap`; None: none."""
        level = self.request.log_level
        if level is None or self.channel is None:
            return None
        if cap is not None and _SEVERITY[cap] > _SEVERITY[level]:
            return cap
        return level

    def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Pass one upstream `notifications/progress` for this call on, under the caller's token."""
        token = self.request.progress_token
        if token is None or self.channel is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        self.channel.notify("notifications/progress", params)

    def log(self, params: Mapping[str, Any], cap: LoggingLevel | None = None) -> bool:
        """Pass one upstream `notifications/message` on if it is at or above the caller's level and `cap`.

        Returns whether it was passed on. A message without a valid level is dropped."""
        wanted = self.wants_logs(cap)
        severity = log_level_value(params.get("level"))
        if wanted is None or severity is None or severity < _SEVERITY[wanted]:
            return False
        assert self.channel is not None
        kept: dict[str, Any] = {"level": params["level"], "data": params.get("data")}
        if isinstance(params.get("logger"), str):
            kept["logger"] = params["logger"]
        self.channel.notify("notifications/message", kept)
        return True

    def cancel(self, reason: str) -> None:
        """Cancel the call (the peer sent `notifications/cancelled`, or went away). Idempotent."""
        if self.channel is not None:
            self.channel.cancel(reason)


_CURRENT: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("agent_sdk_call", default=None)


def current_call() -> CallContext | None:
    """The context of the `tools/call` this task is making, if its caller set one (`calling`)."""
    return _CURRENT.get()


class calling:
    """`with calling(context):` runs the block's `tools/call` with `context` (None: a plain call, as if no
    context was ever set). A class rather than a `@contextmanager` generator: it is entered once a call."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: CallContext | None) -> None:
        self._context = context

    def __enter__(self) -> CallContext | None:
        self._token = _CURRENT.set(self._context)
        return self._context

    def __exit__(self, *_exc: object) -> None:
        _CURRENT.reset(self._token)
