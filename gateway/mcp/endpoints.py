"""The two stateless Streamable HTTP MCP endpoints (docs/http-api.md).

- `/v1/mcp/tools`: the deterministic server tools (authored + advertised connections without
  per-session `auth`) as native MCP tools. `tools/list` lists live and fails closed: a connection
  that cannot be listed is a JSON-RPC error naming it, never a shorter list.
- `/v1/mcp`: `ask` and `check` (sessions behind them), and `call_tool` when server tools exist.

Both are the MCP SDK's lowlevel `Server` behind a `StreamableHTTPSessionManager(stateless=True,
json_response=True)`, so the stateless 2026-07-28 protocol and the handshake versions are both
served. Only POST reaches the manager: its GET would open an endless SSE stream, so GET and
DELETE are 405 here, except a handshake-era session's own GET stream and DELETE on `/v1/mcp/tools`
(`gateway/mcp/peers/streams.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.types import Message, Receive, Scope, Send

from connections import Project
from connections.serving import Offerings

from ..audit import refusal_rpc_error
from ..auth.chain import Principal
from ..errors import ApiError, CallRefused, InvalidRequest, StateUnavailable
from ..http._asgi import receive_body, send_error, send_rpc_error
from ..http.mcp_checks import envelope_problem, header_problem, request_id, serve_batch, version_problem
from ..policy import require
from ..runtime import Runtime, runtime_of
from ..telemetry.spans import install_server_spans
from .call_stream import principal_id, session_header
from .curated import CuratedView
from .lane import serve_lane
from .peers.sessions import answered, with_peer_session
from .peers.streams import StreamRefused
from .task_ext import serve_task_extension
from .tasks import serve_tasks
from .tool_calls import call_tool
from .tools import SERVER_VERSION, json_result, tools_server

__all__ = ["McpEndpoint", "agent_server", "curated_managers", "session_manager"]


def _principal(ctx: ServerRequestContext[Any, Any]) -> Principal:
    """The chain's principal for this request (`session.principal` of the turns and calls it starts)."""
    request: Any = ctx.request
    principal = request.scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else Principal("anonymous", "anonymous")


_ASK = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The message for the agent"},
        "sessionId": {"type": "string", "description": "Continue this session (a follow-up)"},
        "continuationToken": {"type": "string", "description": "Continue the session this token belongs to"},
        "waitMs": {"type": "integer", "minimum": 0, "description": "How long to wait for the reply (capped)"},
    },
    "required": ["message"],
}
_CHECK = {
    "type": "object",
    "properties": {
        "sessionId": {"type": "string", "description": "The session `ask` returned"},
        "waitMs": {"type": "integer", "minimum": 0, "description": "How long to wait for the turn (capped)"},
    },
    "required": ["sessionId"],
}
_CALL = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "The server tool to call"},
        "input": {"type": "object", "description": "The tool's input"},
        "sessionId": {"type": "string", "description": "Bind the call to this session"},
        "continuationToken": {"type": "string", "description": "Bind the call by continuation token"},
    },
    "required": ["name"],
}


def _wait_seconds(runtime: Runtime, value: object) -> float:
    if value is None:
        return runtime.settings.default_wait_ms / 1000
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidRequest("waitMs must be a non-negative integer")
    return min(value, runtime.settings.max_wait_ms) / 1000


def _string(args: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidRequest(f"{name} must be a {'non-empty ' if required else ''}string")
    return value


def agent_server(*, with_call_tool: bool) -> Server[Any]:
    """`/v1/mcp`: `ask`, `check` and (with server tools) `call_tool`."""
    tools = [
        mt.Tool.model_validate(
            {
                "name": "ask",
                "description": "Send the agent a message (a new session, or a follow-up with sessionId or "
                "continuationToken). Waits up to waitMs for the reply; otherwise returns status 'running' "
                "and the sessionId to check.",
                "inputSchema": _ASK,
            }
        ),
        mt.Tool.model_validate(
            {
                "name": "check",
                "description": "The status of a session's latest turn and its reply, waiting up to waitMs for it.",
                "inputSchema": _CHECK,
                "annotations": {"readOnlyHint": True},
            }
        ),
    ]
    if with_call_tool:
        tools.append(
            mt.Tool.model_validate(
                {
                    "name": "call_tool",
                    "description": "Call one of the agent's server tools directly, without a model turn. Returns "
                    "{ok, toolName, callId, isError, result, durationMs}.",
                    "inputSchema": _CALL,
                }
            )
        )
    names = {t.name for t in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        denied = not runtime_of(ctx.request).policy.decide(_principal(ctx), "tools/list").allowed  # pyright: ignore[reportArgumentType]
        return mt.ListToolsResult(tools=[] if denied else tools)

    async def ask(runtime: Runtime, caller: Principal, args: Mapping[str, Any]) -> dict[str, Any]:
        message = _string(args, "message", required=True)
        session_id = _string(args, "sessionId")
        token = _string(args, "continuationToken")
        wait = _wait_seconds(runtime, args.get("waitMs"))
        assert message is not None
        if session_id is not None and token is not None:
            raise InvalidRequest("pass sessionId or continuationToken, not both")
        principal = caller.id
        require(runtime.policy, caller, "session/turn")
        if session_id is not None:
            live = await runtime.sessions.get(session_id, principal)
            live = await runtime.sessions.follow_up(live, message, None, caller=caller)
        elif token is not None:
            live = await runtime.sessions.for_follow_up(token, principal)
            live = await runtime.sessions.follow_up(live, message, token, caller=caller)
        else:
            live = await runtime.sessions.create(principal, message, caller=caller)
        live = await runtime.sessions.wait(live, wait)
        return {"ok": True, **live.snapshot()}

    async def check(runtime: Runtime, principal: str, args: Mapping[str, Any]) -> dict[str, Any]:
        live = await runtime.sessions.get(_string(args, "sessionId", required=True), principal)
        live = await runtime.sessions.wait(live, _wait_seconds(runtime, args.get("waitMs", 0)))
        return {"ok": True, **live.snapshot()}

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> Any:
        if params.name not in names:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {params.name[:64]}", data={"available": sorted(names)})
        runtime, principal = runtime_of(ctx.request), _principal(ctx)  # pyright: ignore[reportArgumentType]
        args: Mapping[str, Any] = params.arguments or {}
        try:
            if params.name == "ask":
                return json_result(await ask(runtime, principal, args))
            if params.name == "check":
                require(runtime.policy, principal, "session/read")
                return json_result(await check(runtime, principal.id, args))
            name = _string(args, "name", required=True)
            assert name is not None
            envelope = await call_tool(
                runtime,
                principal,
                name,
                args.get("input"),
                session_id=_string(args, "sessionId"),
                token=args.get("continuationToken"),
                surface="mcp",
            )
            return json_result(envelope, is_error=bool(envelope["isError"]))
        except CallRefused as exc:  # a limit, an approval, the audit trail: a JSON-RPC error (docs/audit.md)
            raise refusal_rpc_error(exc) from None
        except ApiError as exc:
            return json_result(exc.to_json(), is_error=True)

    server = Server("agent-sdk", version=SERVER_VERSION, on_list_tools=list_tools, on_call_tool=call)
    install_server_spans(server, calls=True)  # its tools/call (ask, check, call_tool) runs no executor
    return server


def session_manager(server: Server[Any], max_body_bytes: int) -> StreamableHTTPSessionManager:
    """Stateless, JSON responses; Host/Origin are checked by the auth chain in front of it."""
    return StreamableHTTPSessionManager(
        server, stateless=True, json_response=True, max_request_body_size=max_body_bytes
    )


_NO_SESSION = (
    "this Mcp-Session-Id was not issued by this gateway to this caller, it expired, or its DELETE ended it: "
    "initialize again, without it"
)


def curated_managers(
    project: Project, max_body_bytes: int, offerings: Offerings | None = None
) -> dict[str, StreamableHTTPSessionManager]:
    """A session manager per curated server (`servers/<name>`): its own SDK server (name, version,
    instructions; the resources and prompts it picks of `offerings`) for what the lane does not answer; the
    lane and the executor are the one every endpoint has (docs/curated-servers.md)."""
    return {
        f"servers/{name}": session_manager(tools_server(offerings=offerings, view=CuratedView(server)), max_body_bytes)
        for name, server in project.servers.items()
    }


async def _session_route(scope: Scope, receive: Receive, send: Send, method: str) -> bool:
    """A handshake-era session's `GET` stream (`mcp/peers/streams.py`) or `DELETE`, which ends the session for good
    (`RequestStates.end_session`); 404 for a session that is not live. False (405) without a session id, and for a
    GET where nothing is relayed (no subscriptions on this gateway)."""
    token = session_header(scope)
    if token is None:
        return False
    runtime: Runtime = scope["state"]["runtime"]
    principal = principal_id(scope)
    streams = runtime.streams
    if method == "GET" and streams is None:
        return False
    try:
        live = await runtime.request_states.live_session(token, principal)
    except StateUnavailable as exc:
        await _send_unavailable(send, exc)
        return True
    if not live:
        await send_error(scope, send, 404, "session_not_found", _NO_SESSION)
        return True
    if method == "GET" and streams is not None:
        await streams.serve(scope, receive, send, token, principal)
        return True
    if streams is not None:
        try:
            await streams.delete(token, principal)
        except StreamRefused as exc:
            await send_error(scope, send, exc.status, "session_refused", str(exc))
            return True
    try:
        await runtime.request_states.end_session(token, principal)
    except StateUnavailable as exc:  # the peer's DELETE again, once Redis answers, ends it
        await _send_unavailable(send, exc)
        return True
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return True


async def _send_unavailable(send: Send, exc: StateUnavailable, ident: str | int | None = None) -> None:
    """Whether the session was ended cannot be read (Redis is away): 503 with the store's sentence and
    `Retry-After` (RFC 9110 §10.2.3), as every other answer that needs the shared state (`json_answers.py`)."""
    await send_rpc_error(send, 503, mt.INTERNAL_ERROR, exc.message, {"error": exc.code}, [(b"retry-after", b"1")],
                         ident=ident)  # fmt: skip


def _curated(scope: Scope) -> CuratedView | str:
    """The curated server the path names, or the sentence of a 404."""
    runtime: Runtime = scope["state"]["runtime"]
    name = str(scope.get("path_params", {}).get("name", ""))
    server = runtime.project.servers.get(name)
    if server is None or f"servers/{name}" not in runtime.mcp:
        known = sorted(runtime.project.servers)
        return (
            f"no curated server named {name[:64]!r} on this gateway; the curated servers are {known} "
            "(one file each under agent/servers/, docs/curated-servers.md)"
        )
    return CuratedView(server)


class McpEndpoint:
    """POST goes to the runtime's session manager named `key`; any other method is 405.

    The body is already capped by `BodyLimit` (by its declared length, or counted as it streams), so
    reading it whole here to check the JSON-RPC envelope is bounded.
    """

    def __init__(self, key: str, *, lane: bool = False, curated: bool = False) -> None:
        self.key = key
        self.lane = lane or curated
        """`tools/call` and `tools/list` are answered by `mcp_lane` (both generations), the rest by the SDK."""
        self.curated = curated
        """`/v1/mcp/servers/{name}`: the curated server `name`, a view over `/v1/mcp/tools` (`curated.py`)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        key, view = self.key, None
        if self.curated:
            found = _curated(scope)
            if isinstance(found, str):
                await send_error(scope, send, 404, "unknown_server", found)
                return
            key, view = f"servers/{found.name}", found
        elif self.lane and method in ("GET", "DELETE") and await _session_route(scope, receive, send, method):
            return
        if method != "POST":
            await send_error(
                scope,
                send,
                405,
                "method_not_allowed",
                "this stateless MCP endpoint takes POST only",
                [(b"allow", b"POST")],
            )
            return
        refused = header_problem(scope)
        if refused is not None:
            status, rpc_code, text = refused
            await send_rpc_error(send, status, rpc_code, text)
            return
        raw = await receive_body(receive)
        if raw is None:
            return  # the client went away
        unsupported = version_problem(scope)
        if unsupported is not None:  # the spec's code and data, answering the request's own id
            text, data = unsupported
            await send_rpc_error(send, 400, mt.UNSUPPORTED_PROTOCOL_VERSION, text, data, ident=request_id(raw))
            return
        runtime: Runtime = scope["state"]["runtime"]
        session = session_header(scope) if self.lane else None
        try:
            live = session is None or await runtime.request_states.live_session(session, principal_id(scope))
        except StateUnavailable as exc:
            await _send_unavailable(send, exc, request_id(raw))
            return
        if not live:
            # Streamable HTTP: an ended or unknown session is 404, so the client starts a new one (docs/http-api.md).
            await send_rpc_error(send, 404, mt.INVALID_REQUEST, _NO_SESSION, {"error": "session_not_found"},
                                 ident=request_id(raw))  # fmt: skip
            return
        manager = runtime.mcp[key]
        if raw.lstrip().startswith(b"["):  # a batch: 2025-03-26 only (mcp_request_checks)
            await serve_batch(manager.handle_request, scope, raw, send)
            return
        message = envelope_problem(raw)
        if isinstance(message, tuple):
            await send_rpc_error(send, 400, *message)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        if self.lane:  # a handshake peer's capabilities and answers (gateway/mcp/peers/sessions.py)
            if await answered(runtime, scope, message, send):
                return
            send = with_peer_session(runtime, scope, message, send)
            if (
                await serve_tasks(runtime, scope, send, message)
                or await serve_task_extension(runtime, scope, send, message)
                or await serve_lane(manager, runtime, scope, receive, send, len(raw), message, view)
            ):
                return
        await manager.handle_request(scope, replay, send)
