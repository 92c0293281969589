"""`/v1/mcp/tools`: the deterministic server tools as native MCP tools, and their two answers.

`tools_list_result` is the only body of `tools/list` on this endpoint, and a `tools/call` is always a
`CallPlan` run by the one executor (`gateway/mcp/pipeline.py`). The lane (`gateway/mcp/lane.py`) runs
them directly; the SDK server built here (`tools_server`) runs them for whatever the lane hands to the
SDK and on `serve --stdio`, with the SDK's session as the call's channel (`session_answer.py`), so
every path answers alike.
Results are JSON, not shaped for a protocol version yet: the caller shapes them for its peer.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import PROTOCOL_VERSION_META_KEY

from connections.serving import Offerings, SignInRequired, tracing_enabled

from ..auth.chain import Principal
from ..policy import caller_of
from ..runtime import Runtime, runtime_of
from ..telemetry.spans import Inbound, inbound_of_scope, install_server_spans
from .call_stream import call_request, peer_of
from .curated import CuratedView
from .discovery import definition, unwrapped
from .instructions import InstructionsMiddleware
from .offerings import offering_handlers
from .peers.streams import subscribe_handlers
from .pipeline import CallPlan, target_of, view_target
from .session_answer import declared_at_initialize, session_answer
from .sign_in import LEFT_OUT_META, SIGN_IN_META, SignInLinks
from .subscriptions import subscription_handlers
from .task_capability import TaskServer
from .visible import visible_listing

__all__ = ["SERVER_VERSION", "json_result", "tools_list_result", "tools_server"]

logger = logging.getLogger(__name__)

SERVER_VERSION = "0.1.0"
_COMPLETE = "complete"


def json_result(value: dict[str, Any], *, is_error: bool = False) -> dict[str, Any]:
    """A `CallToolResult` carrying `value` as JSON text and as structured content."""
    text = json.dumps(value)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": value,
        "isError": is_error,
        "resultType": _COMPLETE,
    }


async def tools_list_result(runtime: Runtime, caller: Principal, view: CuratedView | None = None) -> dict[str, Any]:
    """`tools/list` on `/v1/mcp/tools` (or through curated server `view`): listed live, as `caller` may see
    it (the policy's filter). Fails closed (raises `MCPError` naming the connections that could not be listed,
    never a shorter list) unless every connection left out is set aside (`set_aside`): a per-user connection
    `caller` has not signed in to (named with its sign-in URL in `_meta`), or an `optional=True` one that is
    down (named in a log line)."""
    toolset, aside = await visible_listing(runtime, caller, server=view.name if view is not None else "")
    discovery = runtime.discovery if view is None else None  # discovery mode (docs/discovery.md)
    if view is not None and view.discovery is not None:  # a curated server in discovery mode
        tools = view.discovery.listed(view.shown(toolset))
    elif view is not None:  # a curated server: its tools (`curated.py`)
        tools = [definition(t) for t in view.listed(toolset)]
    elif discovery is not None:  # the meta-tools and the pinned tools
        tools = discovery.listed(toolset)
    else:
        tools = [definition(t) for t in sorted(toolset, key=lambda t: t.name)]
    # The SDK's `ListToolsResult` defaults, which 2026-07-28 requires (the handshake versions drop them).
    result: dict[str, Any] = {"ttlMs": 0, "cacheScope": "private", "tools": tools, "resultType": _COMPLETE}
    signs = SignInLinks(runtime.settings, runtime.request_states).for_problems(aside, caller.id)
    left_out = sorted({p.connection for p in aside if p.code != SignInRequired.code and p.connection})
    for name in left_out:
        logger.warning(
            "tools/list: optional connection %r left out of the listing: %s",
            name,
            next(str(p) for p in aside if p.connection == name),
            extra={"event": "listing_left_out", "connection": name},
        )
    if signs or left_out:
        result["_meta"] = {
            **({SIGN_IN_META: signs} if signs else {}),
            **({LEFT_OUT_META: left_out} if left_out else {}),
        }
    return result


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
    view: CuratedView | None = None,
) -> Server[Any]:
    """The SDK server behind `/v1/mcp/tools`, for what the lane does not answer itself.

    `runtime` finds the runtime for a request: the HTTP request's state by default; `serve --stdio`
    passes its one runtime (a stdio request has no HTTP request). With `offerings`, the server also
    answers the resources, prompts and completion they advertise (`gateway/mcp/offerings.py`). Its `instructions`
    are its upstreams' (`gateway/mcp/instructions.py`). With `view`, it is that curated server
    (`gateway/mcp/curated.py`): its name, version and instructions, its tools, and what it picks of `offerings`.
    """

    async def list_tools(ctx: ServerRequestContext[Any, Any], _params: mt.PaginatedRequestParams | None) -> Any:
        return await tools_list_result(runtime(ctx), caller_of(getattr(ctx.request, "scope", None)), view)

    async def call(ctx: ServerRequestContext[Any, Any], params: mt.CallToolRequestParams) -> Any:
        served = runtime(ctx)
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        # discovery mode's `call_tool` is the named tool's own call (gateway/mcp/discovery.py)
        dumped = unwrapped(served.discovery if view is None else view.discovery, dumped)
        scope = getattr(ctx.request, "scope", None)  # none on `serve --stdio`: its one peer is `STDIO`
        principal = caller_of(scope).id  # the chain's principal; `stdio` there, as its listings are
        session = getattr(ctx.request, "headers", {}).get("mcp-session-id")
        meta = dumped.get("_meta")
        modern = isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta
        who = (principal, None if modern else session)
        request = call_request(served.peers, who, dumped, modern=modern)
        if not modern:  # what it declared at `initialize`: sealed in its session on HTTP, the SDK's session on stdio
            declared = served.request_states.open_session(session, principal) if session else {}
            if scope is None:
                declared = declared_at_initialize(ctx)
            if declared:
                request = replace(request, capabilities=declared)
        caller = caller_of(scope)
        if view is None:
            target, arguments = await target_of(served, dumped["name"], caller), dumped.get("arguments")
        else:
            target, arguments = await view_target(served, view, dumped["name"], caller, dumped.get("arguments"))
        plan = CallPlan(
            request_id=ctx.request_id,
            target=target,
            arguments=arguments,
            params=dumped,
            principal=principal,
            caller=caller,
            version=ctx.protocol_version,
            modern=modern,
            request=request,
            answer="session",
            inbound=_inbound(scope, session, principal) if tracing_enabled() else None,
            view=view,
            served_as=dumped["name"] if view is not None else None,
        )
        async with session_answer(ctx) as channel:
            result = await served.executor.execute(plan, channel)
        return result

    async def set_level(ctx: ServerRequestContext[Any, Any], params: mt.SetLevelRequestParams) -> Any:
        # The level is the peer's (its principal and `Mcp-Session-Id`), for its later calls (mcp/peers/calls.py).
        scope = getattr(ctx.request, "scope", None)  # none on `serve --stdio`: its one peer is `STDIO`, as its calls
        runtime(ctx).peers.set_level(peer_of(scope) if scope else (caller_of(scope).id, None), params.level)
        return {}

    # The handlers return JSON dicts: the SDK validates and shapes them for the peer's version.
    with warnings.catch_warnings():
        # Logging is deprecated at 2026-07-28 (SEP-2577) but still in it, and the handshake era has it:
        # a gateway forwards what its upstreams log (docs/http-api.md).
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = TaskServer(
            view.name if view is not None else "agent-sdk-tools",
            version=(view.server.version or SERVER_VERSION) if view is not None else SERVER_VERSION,
            title=view.server.title if view is not None else None,
            instructions=view.server.instructions if view is not None else None,
            relays_changes=subscriptions,  # the GET stream carries list_changed (gateway/mcp/peers/streams.py)
            on_list_tools=list_tools,
            on_call_tool=call,
            on_set_logging_level=set_level,  # declares `logging` in the server's capabilities
            **offering_handlers(runtime, offerings, view),
            **(subscription_handlers(runtime) if subscriptions else {}),
            **(subscribe_handlers(runtime) if subscriptions and _offers_resources(offerings) else {}),
        )
    install_server_spans(server)  # ours in place of the SDK's tracing (gateway/telemetry/spans.py)
    if view is None:
        server.middleware.append(InstructionsMiddleware(server, runtime))  # the upstreams' instructions
    return server


def _inbound(scope: Mapping[str, Any] | None, session: str | None, principal: str) -> Inbound:
    """Where a call the SDK's session answers came from: HTTP (its scope), or `serve --stdio` (none)."""
    return inbound_of_scope(scope, session, principal) if scope else Inbound({}, None, "pipe", principal)
