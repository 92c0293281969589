"""`/v1/mcp/tools`: the deterministic server tools as native MCP tools, and their two answers.

`tools_list_result` and `tools_call_result` are the only bodies of `tools/list` and `tools/call`
on this endpoint. The lane (`gateway/mcp/lane.py`) calls them directly; the SDK server built here
(`tools_server`) calls them for whatever the lane hands to the SDK, so both paths answer alike.
Results are JSON, not shaped for a protocol version yet: the caller shapes them for its peer.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from connections import (
    ConnectionsError,
    ToolInputError,
    ToolOutcome,
    TurnBuildError,
    TurnTool,
    UpstreamError,
    acting_for,
)
from connections.serving import CallContext, Offerings, SignInRequired

from ..audit import refusal_rpc_error
from ..auth.chain import Principal
from ..errors import CallRefused
from ..policy import callable_tool, caller_of, visible_tools
from ..runtime import Runtime, runtime_of
from .call_stream import peer_of, principal_id
from .instructions import InstructionsMiddleware
from .offerings import failed_closed, offering_handlers
from .peers.input import PeerCall, peer_call
from .peers.streams import subscribe_handlers
from .sign_in import SignInLinks, sign_in_answer
from .subscriptions import subscription_handlers
from .task_capability import TaskServer
from .tool_calls import missing_tool

__all__ = ["SERVER_VERSION", "json_result", "server_tool", "tools_call_result", "tools_list_result", "tools_server"]

SERVER_VERSION = "0.1.0"
_COMPLETE = "complete"


def _mcp_tool(tool: TurnTool) -> dict[str, Any]:
    data: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": dict(tool.input_schema)}
    if tool.title:
        data["title"] = tool.title
    if tool.output_schema is not None:
        data["outputSchema"] = dict(tool.output_schema)
    if tool.annotations:
        data["annotations"] = dict(tool.annotations)
    if tool.execution:
        data["execution"] = dict(tool.execution)
    return data


def json_result(value: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    """A `CallToolResult` carrying `value` as JSON text and as structured content."""
    text = json.dumps(value)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": value,
        "isError": is_error,
        "resultType": _COMPLETE,
    }


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": _COMPLETE}


def _failure_result(exc: Exception) -> dict[str, Any]:
    """What the peer sees when a tool call raised: an error result, never a JSON-RPC error."""
    if isinstance(exc, ToolInputError):
        return _error_result(str(exc))
    if isinstance(exc, ConnectionsError):
        return _error_result(f"{exc.code}: {exc}")
    return _error_result(f"{type(exc).__name__}: {exc}"[:500])


async def server_tool(runtime: Runtime, name: str, caller: Principal) -> TurnTool:
    """The server tool `name` for `caller`'s `tools/call` (listed as `caller`, when a listing is needed).
    Raises `MCPError` (invalid params) for an unknown tool, one the policy hides from `caller` (the same
    answer) and one `mcp.lock` holds back (its sentence says what changed), and `SignInRequired` when
    `caller` must sign in to a per-user connection to list it."""
    with acting_for(caller.id):  # hidden: as unknown (gateway/policy/)
        tool, toolset, problems = await callable_tool(runtime.policy, caller, runtime.catalog, name, None, None)
    if tool is not None:
        return tool
    signing = next((p for p in problems if p.code == SignInRequired.code and p.connection), None)
    if signing is not None and signing.connection is not None:  # the tool may be that connection's
        raise SignInRequired(signing.connection, caller.id, signing.message)
    held = toolset.held_back.get(name)
    if held is not None:
        raise MCPError(mt.INVALID_PARAMS, f"Tool {name[:64]!r} is held back: {held}", data={"error": "tool_held_back"})
    refusal = missing_tool(name, toolset.names(), problems)
    message = f"Unknown tool: {name[:64]}" if not problems else refusal.message
    raise MCPError(mt.INVALID_PARAMS, message, data={"error": refusal.code, **refusal.extra})


async def tools_call_result(
    runtime: Runtime,
    name: str,
    arguments: Mapping[str, Any] | None,
    peer: PeerCall | None,
    principal: str,
    caller: Principal,
) -> dict[str, Any]:
    """`tools/call` on `/v1/mcp/tools`: the `CallToolResult` as JSON. A passthrough result is the
    upstream's JSON as the pool returned it (`ToolOutcome.mcp_result`); a failing tool is an error
    result. With `peer` (a caller that answers input requests, `gateway/mcp/peers/input.py`) the call runs with its
    context, and an upstream's `InputRequiredResult` goes back to it sealed. Raises `MCPError` for an
    unknown tool, and the upstream's own -32042 (URL elicitation required) error. The call is
    `principal`'s (`acting_for`), even where a held call runs it in a task of its own; `caller` is whom the
    policy decides for. A per-user connection the caller has no grant for answers with a way to sign in
    (`sign_in.py`)."""
    try:
        tool = await server_tool(runtime, name, caller)  # a listing it needs first is the caller's too
    except SignInRequired as exc:
        return _signing_in(runtime, exc, name, peer)
    if runtime.guard is not None:  # audit, limits, approval (docs/audit.md)
        tool = runtime.guard.tool(tool, None, caller if caller.id == principal else principal)

    async def call() -> ToolOutcome:
        with acting_for(principal):
            return await tool.call(arguments)

    try:
        if peer is None:
            result = (await call()).mcp_result()
        else:
            result = peer.finish(await peer.run(call))
    except CallRefused as exc:
        raise refusal_rpc_error(exc) from None
    except SignInRequired as exc:  # the caller's own grant is missing: a way to sign in, never a smaller answer
        return _signing_in(runtime, exc, name, peer)
    except UpstreamError as exc:
        if exc.rpc_code == mt.URL_ELICITATION_REQUIRED:
            # The upstream needs the user to open a URL first (2025-11-25's URLElicitationRequiredError): a
            # result would lose the URL; the peer gets the error itself, to open `data.elicitations` and retry.
            raise MCPError(exc.rpc_code, exc.rpc_message, data=exc.rpc_data) from None
        return _failure_result(exc)
    except Exception as exc:  # boundary: the tool body raised; the peer sees an error result
        return _failure_result(exc)
    if "resultType" not in result:  # a handshake-era upstream's, or ours: complete (2026-07-28 requires it)
        result = {**result, "resultType": _COMPLETE}
    return result


def _signing_in(runtime: Runtime, exc: SignInRequired, tool: str, peer: PeerCall | None) -> dict[str, Any]:
    links = SignInLinks(runtime.settings, runtime.request_states)
    declared = (peer.context.capabilities if peer is not None else None) or {}
    modern = peer is not None and peer.held_calls is not None
    return sign_in_answer(links, runtime.request_states, exc, tool=tool, capabilities=declared, modern=modern)


async def tools_list_result(runtime: Runtime, caller: Principal) -> dict[str, Any]:
    """`tools/list` on `/v1/mcp/tools`: listed live, fail-closed, as `caller` may see it (the policy's
    filter). Raises `MCPError` naming the connections that could not be listed, never a shorter list."""
    try:
        with acting_for(caller.id):
            toolset = await runtime.catalog.live()
    except TurnBuildError as exc:
        refusal = failed_closed("tools/list", exc)
        signs = SignInLinks(runtime.settings, runtime.request_states).for_problems(exc.problems, caller.id)
        if signs:
            urls = "; ".join(f"sign in to {s['connection']} at {s['url']}" for s in signs)
            data = {**(refusal.error.data or {}), "signIn": signs}
            raise MCPError(refusal.error.code, f"{refusal.error.message}; {urls}", data=data) from None
        raise refusal from None
    toolset = visible_tools(runtime.policy, caller, toolset)[0]
    tools = [_mcp_tool(t) for t in sorted(toolset, key=lambda t: t.name)]
    # The SDK's `ListToolsResult` defaults, which 2026-07-28 requires (the handshake versions drop them).
    return {"ttlMs": 0, "cacheScope": "private", "tools": tools, "resultType": _COMPLETE}


def _http_runtime(ctx: ServerRequestContext[Any, Any]) -> Runtime:
    request: Any = ctx.request  # the Starlette request of a Streamable HTTP POST
    return runtime_of(request)


def _offers_resources(offerings: Offerings | None) -> bool:
    return offerings is not None and offerings.offers("resources")


def tools_server(
    runtime: Callable[[ServerRequestContext[Any, Any]], Runtime] = _http_runtime,
    offerings: Offerings | None = None,
    *,
    subscriptions: bool = False,
) -> Server[Any]:
    """The SDK server behind `/v1/mcp/tools`, for what the lane does not answer itself.

    `runtime` finds the runtime for a request: the HTTP request's state by default; `serve --stdio`
    passes its one runtime (a stdio request has no HTTP request). With `offerings`, the server also
    answers the resources, prompts and completion they advertise (`gateway/mcp/offerings.py`). Its `instructions`
    are its upstreams' (`gateway/mcp/instructions.py`).
    """

    async def list_tools(ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None) -> Any:
        return await tools_list_result(runtime(ctx), caller_of(getattr(ctx.request, "scope", None)))

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> Any:
        served = runtime(ctx)
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        principal = principal_id(getattr(ctx.request, "scope", None) or {})  # none on `serve --stdio`
        session = getattr(ctx.request, "headers", {}).get("mcp-session-id")
        peer = await peer_call(served, principal, dumped, CallContext(), session)
        caller = caller_of(getattr(ctx.request, "scope", None))
        return await tools_call_result(served, params.name, params.arguments, peer, principal, caller)

    async def set_level(ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams) -> Any:
        # The level is the peer's (its principal and `Mcp-Session-Id`), for its later calls (mcp/peers/calls.py).
        scope = getattr(ctx.request, "scope", None)  # none on `serve --stdio`: its one peer is `anonymous`
        runtime(ctx).peers.set_level(peer_of(scope) if scope else ("anonymous", None), params.level)
        return {}

    # The handlers return JSON dicts: the SDK validates and shapes them for the peer's version.
    with warnings.catch_warnings():
        # Logging is deprecated at 2026-07-28 (SEP-2577) but still in it, and the handshake era has it:
        # a gateway forwards what its upstreams log (docs/http-api.md).
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = TaskServer(
            "agent-sdk-tools",
            version=SERVER_VERSION,
            relays_changes=subscriptions,  # the GET stream carries list_changed (gateway/mcp/peers/streams.py)
            on_list_tools=list_tools,
            on_call_tool=call,
            on_set_logging_level=set_level,  # declares `logging` in the server's capabilities
            **offering_handlers(runtime, offerings),
            **(subscription_handlers(runtime) if subscriptions else {}),
            **(subscribe_handlers(runtime) if subscriptions and _offers_resources(offerings) else {}),
        )
    server.middleware.append(InstructionsMiddleware(server, runtime))  # the upstreams' instructions
    return server
