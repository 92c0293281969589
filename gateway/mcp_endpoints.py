"""The two stateless Streamable HTTP MCP endpoints (DESIGN.md §8).

- `/v1/mcp/tools`: the deterministic server tools (authored + advertised connections without
  per-session `auth`) as native MCP tools. `tools/list` lists live and fails closed: a connection
  that cannot be listed is a JSON-RPC error naming it, never a shorter list.
- `/v1/mcp`: `ask` and `check` (sessions behind them), and `call_tool` when server tools exist.

Both are the MCP SDK's lowlevel `Server` behind a `StreamableHTTPSessionManager(stateless=True,
json_response=True)`, so the stateless 2026-07-28 protocol and the handshake versions are both
served. Only POST reaches the manager: its GET would open an endless SSE stream, so GET and
DELETE are 405 here.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Mapping
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.methods import serialize_server_result
from starlette.types import Message, Receive, Scope, Send

from connections import ConnectionsError, ToolInputError, ToolOutcome, TurnBuildError, TurnTool

from ._asgi import JsonRefused, loads_bounded, receive_body, send_error, send_rpc_error
from .auth_chain import Principal
from .errors import ApiError, InvalidRequest
from .mcp_fast_path import serve_tools_call
from .runtime import Runtime
from .tool_calls import call_tool

__all__ = [
    "McpEndpoint",
    "agent_server",
    "answer_tools_call",
    "answer_tools_call_json",
    "session_manager",
    "tools_server",
]

_VERSION = "0.1.0"


def _runtime(ctx: ServerRequestContext[Any, Any]) -> Runtime:
    request: Any = ctx.request
    return request.state.runtime


def _principal(ctx: ServerRequestContext[Any, Any]) -> str:
    request: Any = ctx.request
    principal = request.scope.get("state", {}).get("principal")
    return principal.id if isinstance(principal, Principal) else "anonymous"


def _mcp_tool(tool: TurnTool) -> mt.Tool:
    data: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": dict(tool.input_schema)}
    if tool.title:
        data["title"] = tool.title
    if tool.output_schema is not None:
        data["outputSchema"] = dict(tool.output_schema)
    if tool.annotations:
        data["annotations"] = dict(tool.annotations)
    return mt.Tool.model_validate(data)


def _error_result(message: str, structured: dict[str, Any] | None = None) -> mt.CallToolResult:
    return mt.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": message}],
            "isError": True,
            **({"structuredContent": structured} if structured else {}),
        }
    )


def _outcome_result(outcome: ToolOutcome) -> mt.CallToolResult:
    if outcome.upstream is not None:  # passthrough: the same fields, without a dump and re-validation
        upstream = outcome.upstream
        return mt.CallToolResult(
            content=upstream.content, structured_content=upstream.structured_content, is_error=outcome.is_error
        )
    data: dict[str, Any] = {"content": outcome.content, "isError": outcome.is_error}
    if outcome.structured is not None:
        data["structuredContent"] = outcome.structured
    return mt.CallToolResult.model_validate(data)


def _json_result(value: dict[str, Any], *, is_error: bool = False) -> mt.CallToolResult:
    return mt.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value, "isError": is_error}
    )


async def _server_tool(runtime: Runtime, name: str) -> TurnTool:
    """The server tool `name` for a `tools/call`. Raises `MCPError` (invalid params) for an unknown tool."""
    tool, toolset, problems = await runtime.catalog.tool(name, None)
    if tool is None:
        data: dict[str, Any] = {"error": "unknown_tool", "available": toolset.names()}
        if problems:
            data["connectionErrors"] = [p.to_json() for p in problems]
        raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {name[:64]}", data=data)
    return tool


def _failure_result(exc: Exception) -> mt.CallToolResult:
    """What the peer sees when a tool call raised: an error result, never a JSON-RPC error."""
    if isinstance(exc, ToolInputError):
        return _error_result(str(exc))
    if isinstance(exc, ConnectionsError):
        return _error_result(f"{exc.code}: {exc}")
    return _error_result(f"{type(exc).__name__}: {exc}"[:500])


async def answer_tools_call(runtime: Runtime, params: mt.CallToolRequestParams) -> mt.CallToolResult:
    """`tools/call` on `/v1/mcp/tools`: a server tool through the catalog. Raises `MCPError` for an unknown tool.

    The handler the SDK kernel calls.
    """
    tool = await _server_tool(runtime, params.name)
    try:
        outcome = await tool.call(params.arguments or {})
    except Exception as exc:  # boundary: the tool body raised; the peer sees an error result
        return _failure_result(exc)
    return _outcome_result(outcome)


async def answer_tools_call_json(
    runtime: Runtime, name: str, arguments: Mapping[str, Any] | None, version: str
) -> dict[str, Any]:
    """`answer_tools_call` with the result as JSON in `version`'s shape, for `mcp_fast_path`.

    A pooled passthrough tool's result stays JSON from the upstream to the peer (`TurnTool.call_raw`);
    any other tool's is the model `answer_tools_call` builds, dumped. Raises `MCPError` for an unknown
    tool and `pydantic.ValidationError` for a result that does not fit `version`'s schema.
    """
    tool = await _server_tool(runtime, name)
    try:
        invoke_raw = tool.invoke_raw  # `TurnTool.call_raw` without its frame
        raw = None if invoke_raw is None else await invoke_raw(arguments or {})
        result = _outcome_result(await tool.call(arguments)) if raw is None else None
    except Exception as exc:  # boundary: the tool body raised; the peer sees an error result
        raw, result = None, _failure_result(exc)
    if raw is not None:
        return raw.for_version(version)
    assert result is not None
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return serialize_server_result("tools/call", version, dumped)


def tools_server() -> Server[Any]:
    """`/v1/mcp/tools`: native MCP tools, listed live (fail-closed), called through the catalog."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        try:
            toolset = await _runtime(ctx).catalog.live()
        except TurnBuildError as exc:
            names = sorted({p.connection for p in exc.problems if p.connection})
            raise MCPError(
                mt.INTERNAL_ERROR,
                f"tools/list failed closed: connection(s) {', '.join(names) or '?'} could not be listed: "
                + "; ".join(str(p) for p in exc.problems),
                data={"error": exc.code, "problems": [p.to_json() for p in exc.problems]},
            ) from None
        return mt.ListToolsResult(tools=[_mcp_tool(t) for t in sorted(toolset, key=lambda t: t.name)])

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        return await answer_tools_call(_runtime(ctx), params)

    return Server("agent-sdk-tools", version=_VERSION, on_list_tools=list_tools, on_call_tool=call)


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
        _ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(tools=tools)

    async def ask(runtime: Runtime, principal: str, args: Mapping[str, Any]) -> dict[str, Any]:
        message = _string(args, "message", required=True)
        session_id = _string(args, "sessionId")
        token = _string(args, "continuationToken")
        wait = _wait_seconds(runtime, args.get("waitMs"))
        assert message is not None
        if session_id is not None and token is not None:
            raise InvalidRequest("pass sessionId or continuationToken, not both")
        if session_id is not None:
            live = await runtime.sessions.follow_up(runtime.sessions.get(session_id, principal), message, None)
        elif token is not None:
            live = runtime.sessions.for_follow_up(token, principal)
            await runtime.sessions.follow_up(live, message, token)
        else:
            live = await runtime.sessions.create(principal, message)
        await runtime.sessions.wait(live, wait)
        return {"ok": True, **live.snapshot()}

    async def check(runtime: Runtime, principal: str, args: Mapping[str, Any]) -> dict[str, Any]:
        live = runtime.sessions.get(_string(args, "sessionId", required=True), principal)
        await runtime.sessions.wait(live, _wait_seconds(runtime, args.get("waitMs", 0)))
        return {"ok": True, **live.snapshot()}

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> mt.CallToolResult:
        if params.name not in names:
            raise MCPError(mt.INVALID_PARAMS, f"Unknown tool: {params.name[:64]}", data={"available": sorted(names)})
        runtime, principal = _runtime(ctx), _principal(ctx)
        args: Mapping[str, Any] = params.arguments or {}
        try:
            if params.name == "ask":
                return _json_result(await ask(runtime, principal, args))
            if params.name == "check":
                return _json_result(await check(runtime, principal, args))
            name = _string(args, "name", required=True)
            assert name is not None
            envelope = await call_tool(
                runtime,
                principal,
                name,
                args.get("input"),
                session_id=_string(args, "sessionId"),
                token=args.get("continuationToken"),
            )
            return _json_result(envelope, is_error=bool(envelope["isError"]))
        except ApiError as exc:
            return _json_result(exc.to_json(), is_error=True)

    return Server("agent-sdk", version=_VERSION, on_list_tools=list_tools, on_call_tool=call)


def session_manager(server: Server[Any], max_body_bytes: int) -> StreamableHTTPSessionManager:
    """Stateless, JSON responses; Host/Origin are checked by the auth chain in front of it."""
    return StreamableHTTPSessionManager(
        server, stateless=True, json_response=True, max_request_body_size=max_body_bytes
    )


def _envelope_problem(raw: bytes) -> tuple[int, str] | dict[str, Any]:
    """A JSON-RPC 2.0 error code and sentence when `raw` is not one well-formed message, else the message.

    Checked before the SDK so that every malformed body, in either protocol era, gets the same
    short answer (JSON-RPC 2.0 §4, §5.1) instead of a validation dump.
    """
    try:
        message = loads_bounded(raw)
    except JsonRefused as exc:
        return mt.PARSE_ERROR, f"Parse error: {exc}"
    if isinstance(message, list):
        return mt.INVALID_REQUEST, "Invalid Request: batches are not accepted; send one JSON-RPC message per POST"
    if not isinstance(message, dict):
        return mt.INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC object"
    body: dict[str, Any] = message  # pyright: ignore[reportUnknownVariableType]
    if body.get("jsonrpc") != "2.0":
        return mt.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'
    if "id" in body:
        ident = body["id"]
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return mt.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
    if "method" in body and not isinstance(body["method"], str):
        return mt.INVALID_REQUEST, "Invalid Request: method must be a string"
    if "method" not in body and "result" not in body and "error" not in body:
        return mt.INVALID_REQUEST, "Invalid Request: no method"
    if "params" in body and not isinstance(body["params"], dict):
        return mt.INVALID_PARAMS, "Invalid params: params must be an object"
    return body


def _tools_call_handler(
    scope: Scope, name: str, arguments: Mapping[str, Any] | None, version: str
) -> Awaitable[dict[str, Any]]:
    # A plain function handing back the coroutine: no frame of its own for every resume to pass through.
    runtime: Runtime = scope["state"]["runtime"]
    return answer_tools_call_json(runtime, name, arguments, version)


class McpEndpoint:
    """POST goes to the runtime's session manager named `key`; any other method is 405.

    The body is already capped by `BodyLimit` (by its declared length, or counted as it streams), so
    reading it whole here to check the JSON-RPC envelope is bounded.
    """

    def __init__(self, key: str, *, fast_tools_call: bool = False) -> None:
        self.key = key
        # A handshake-era `tools/call` is answered by `mcp_fast_path` (same kernel, no per-request transport).
        self.fast_tools_call = fast_tools_call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await send_error(
                scope,
                send,
                405,
                "method_not_allowed",
                "this stateless MCP endpoint takes POST only",
                [(b"allow", b"POST")],
            )
            return
        raw = await receive_body(receive)
        if raw is None:
            return  # the client went away
        message = _envelope_problem(raw)
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

        runtime: Runtime = scope["state"]["runtime"]
        manager = runtime.mcp[self.key]
        if self.fast_tools_call and await serve_tools_call(
            manager, scope, replay, send, raw, message, handler=_tools_call_handler
        ):
            return
        await manager.handle_request(scope, replay, send)
