"""Where an upstream's notifications about a call go back to: the call's `CallContext` (`_call_context.py`).

`call_upstream_tool` asks `prepare_call` for the call options and `_meta` that make the upstream report
on the call, and every wire routes what comes back to the context of the call it belongs to:

- **progress**: the upstream request carries a progress token of the wire's own (its request id,
  as the SDK's dispatcher mints it); the SDK's dispatcher routes each `notifications/progress` by
  it to the call's `on_progress` (stdio, SSE, the SDK transport: several callers share one
  session, each gets only its own), and the fast wire reads it off the call's own answer stream
  (`connections/client/_fast_answers.py`). Either way `CallContext.progress` passes it on under the caller's token.
- **log messages**: at 2026-07-28 the level travels per request in `_meta`
  (`io.modelcontextprotocol/logLevel`) and the upstream sends `notifications/message` on that
  request's answer only. At the handshake versions the level is the session's
  (`logging/setLevel`): the pool's session is lowered to the most verbose level a caller has asked
  for (never raised again: other callers may want it) and each caller's messages are filtered by
  its own level. A message on a call's own answer stream (the fast wire) goes to that call; one
  that arrives without saying which request it is about (stdio, SSE, the SDK transport) goes to
  the one call on the session that asked for logs when it is the only request in flight there,
  and is dropped otherwise: one caller's log lines never reach another caller.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Mapping
from typing import Any

import mcp_types as mt
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import LOG_LEVEL_META_KEY, LoggingLevel
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._call_context import CallContext, log_level_value

__all__ = ["SessionLogs", "prepare_call", "session_logs", "stream_log"]


class SessionLogs:
    """One pooled session's logging state: its upstream level, and the calls that asked for log messages."""

    __slots__ = ("calls", "dispatcher", "level", "standing")

    def __init__(self) -> None:
        self.level: int | None = None
        """The rank of the level last sent with `logging/setLevel` (handshake sessions); None: never sent."""
        self.calls: dict[CallContext, LoggingLevel | None] = {}
        """The calls in flight that want log messages, with their connection's cap."""
        self.dispatcher: Any = None
        """The session's SDK dispatcher, whose pending requests say whether a call is alone in flight."""
        self.standing = 0
        """Requests the pool itself holds open on the session (`subscriptions/listen`): never a call, so
        they do not count against a call being alone in flight."""

    async def on_log(self, params: mt.LoggingMessageNotificationParams) -> None:
        """The session's `logging_callback`: a message that names no request goes to the only caller, if alone."""
        if len(self.calls) != 1 or getattr(self.dispatcher, "routes_by_stream", False):
            return  # several callers, or the fast wire: its calls' messages come on their own answers
        pending = getattr(self.dispatcher, "_pending", None)
        if pending is not None and len(pending) - self.standing > 1:
            return  # another request is in flight: the message may be about it
        ((context, cap),) = self.calls.items()
        context.log(params.model_dump(mode="json", by_alias=True, exclude_none=True), cap)


_LOGS: weakref.WeakKeyDictionary[Any, SessionLogs] = weakref.WeakKeyDictionary()


def session_logs(session: Any, logs: SessionLogs | None = None) -> SessionLogs:
    """The `SessionLogs` of `session` (a `ClientSession`): `logs` once `open_client` has passed its
    `on_log` as the client's `logging_callback`, made on first use otherwise."""
    found = _LOGS.get(session)
    if found is None:
        found = _LOGS[session] = logs or SessionLogs()
    return found


async def prepare_call(
    client: Client, context: CallContext, params: dict[str, Any], opts: dict[str, Any], cap: LoggingLevel | None
) -> SessionLogs | None:
    """Set up the stamped request `params` and call `opts` so the upstream reports on this call to `context`.

    Returns the session's `SessionLogs` with the call registered in it (the caller removes it when the
    call ends), or None when the call asked for no log messages. Raises what `logging/setLevel` raises.
    """
    if context.wants_progress:

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            context.progress(progress, total, message)

        opts["on_progress"] = on_progress
    level = context.wants_logs(cap)
    if level is None:
        return None
    logs = session_logs(client.session)
    if client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        rank = log_level_value(level)
        assert rank is not None
        if client.session.server_capabilities is not None and client.session.server_capabilities.logging is not None:
            if logs.level is None or rank < logs.level:
                with warnings.catch_warnings():  # deprecated at 2026-07-28 only; this is a handshake session
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.session.set_logging_level(level)  # pyright: ignore[reportDeprecated]
                logs.level = rank
    else:
        meta: dict[str, Any] = params.setdefault("_meta", {})
        meta[LOG_LEVEL_META_KEY] = level
    logs.dispatcher = getattr(client.session, "_dispatcher", None)
    logs.calls[context] = cap
    return logs


def stream_log(session: Any, context: CallContext | None, params: Mapping[str, Any] | None) -> None:
    """A `notifications/message` met on a call's own answer stream (the fast wire): to that call only."""
    logs = _LOGS.get(session)
    if context is None or logs is None or context not in logs.calls or not isinstance(params, Mapping):
        return
    context.log(params, logs.calls[context])
