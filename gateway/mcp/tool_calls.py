"""A direct tool call, as `POST /v1/tools/{name}` and the `call_tool` MCP tool both make it (docs/http-api.md)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Mapping
from typing import Any

from connections import ConnectionsError, SessionInfo, ToolInputError, ToolOutcome, acting_for

from ..auth.chain import Principal
from ..errors import CallRefused, InvalidContinuationToken, InvalidToolInput, SessionBusy, ToolHeldBack
from ..policy import as_principal, callable_tool
from ..runtime import Runtime
from ..sessions import LiveSession, parse_continuation_token
from .toolsets import missing_tool

__all__ = ["bind_session", "call_tool"]


async def bind_session(
    runtime: Runtime, principal: str | Principal, session_id: object, token: object
) -> tuple[LiveSession | None, SessionInfo | None]:
    """The session a call or listing is bound to, and the identity its toolset is built for (with the
    `Principal` itself as `session.principal`, when one is given rather than its id).

    Raises `InvalidContinuationToken` (malformed, or given with `sessionId`), `SessionNotFound`,
    `Forbidden`. A well-formed token that names no session binds to a scratch identity made of
    the token's channel id and key.
    """
    live, info = await _bound(runtime, principal if isinstance(principal, str) else principal.id, session_id, token)
    if info is not None and isinstance(principal, Principal):
        info = dataclasses.replace(info, principal=principal)
    return live, info


async def _bound(
    runtime: Runtime, principal: str, session_id: object, token: object
) -> tuple[LiveSession | None, SessionInfo | None]:
    if session_id is not None and token is not None:
        raise InvalidContinuationToken("pass sessionId or continuationToken, not both")
    if session_id is not None:
        live = await runtime.sessions.get(session_id, principal)
        return live, live.info()
    if token is not None:
        channel, key = parse_continuation_token(token)
        assert isinstance(token, str)
        live = await runtime.sessions.by_token(token, principal)
        if live is not None:
            return live, live.info()
        return None, SessionInfo(id=f"{channel}:{key}", channel_id=channel, auth=principal)
    return None, None


async def call_tool(
    runtime: Runtime,
    principal: str | Principal,
    name: str,
    arguments: object,
    *,
    session_id: object = None,
    token: object = None,
    surface: str = "http",
) -> dict[str, Any]:
    """Run one tool with no model turn; the envelope `{ok, toolName, callId, isError, result, durationMs}`.

    Raises `ApiError`s: `UnknownTool` (with the available names), `ConnectionNotListed` (the tool may be
    on a connection that could not be listed: `missing_tool`), `InvalidToolInput`,
    `InvalidContinuationToken`, `SessionNotFound`, `Forbidden`, `SessionBusy`, and the guard's `CallRefused`
    (`RateLimited`, `ApprovalDenied`, ...: docs/audit.md). `surface` names the route in the audit trail.
    The listing and the call both act for the caller (`acting_for`): a `grants="per_principal"` connection
    is listed and called with the caller's own grant, as on `/v1/mcp/tools`.
    """
    with acting_for(principal if isinstance(principal, str) else principal.id):
        return await _call_tool(runtime, principal, name, arguments, session_id, token, surface)


async def _call_tool(
    runtime: Runtime,
    principal: str | Principal,
    name: str,
    arguments: object,
    session_id: object,
    token: object,
    surface: str,
) -> dict[str, Any]:
    live, info = await bind_session(runtime, principal, session_id, token)
    caller = as_principal(principal, principal if isinstance(principal, str) else principal.id)
    tool, toolset, problems = await callable_tool(
        runtime.policy, caller, runtime.catalog, name, info, surface
    )  # hidden: unknown
    held = toolset.held_back.get(name)
    if tool is None and held is not None:
        raise ToolHeldBack(f"tool {name[:64]!r} is held back: {held}")
    if tool is None:
        raise missing_tool(name, toolset.names(), problems)
    if live is not None and live.busy and tool.effect != "read":
        raise SessionBusy(f"session {live.id} is running a turn; {name!r} is not a read-effect tool, retry after it")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        raise InvalidToolInput(f"invalid input for tool {name!r}: input must be a JSON object")
    if runtime.guard is not None:  # audit, limits, approval (docs/audit.md)
        tool = runtime.guard.tool(tool, surface, caller)
    call_id = f"tool_{name}_{uuid.uuid4().hex[:12]}"
    started = time.perf_counter()
    outcome: ToolOutcome
    try:
        outcome = await tool.call(dict(arguments))
    except ToolInputError as exc:
        raise InvalidToolInput(str(exc)) from None
    except CallRefused:
        raise
    except ConnectionsError as exc:
        outcome = ToolOutcome(is_error=True, result={"error": exc.code, "message": str(exc)})
    except Exception as exc:  # boundary: the tool body raised; the caller gets what the model would see
        outcome = ToolOutcome(
            is_error=True, result={"error": "tool_failed", "message": f"{type(exc).__name__}: {exc}"[:500]}
        )
    duration_ms = round((time.perf_counter() - started) * 1000)
    if live is not None:
        await runtime.sessions.record_tool_call(live, call_id, name, dict(arguments), outcome, duration_ms)
    return {
        "ok": True,
        "toolName": name,
        "callId": call_id,
        "isError": outcome.is_error,
        "result": outcome.result,
        "durationMs": duration_ms,
    }
