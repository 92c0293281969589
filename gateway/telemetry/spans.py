"""The gateway's server spans, in the OpenTelemetry MCP conventions (`semantic-conventions-genai`,
their page on MCP).

One SERVER span per peer request, named `{mcp.method.name} {target}` (the tool or prompt name where
there is one). `tools/call` is spanned by the executor's wrapper (`gateway/mcp/pipeline.py`, `traced`),
whatever front and answer it took; `tools/list` on the lane by the lane; every other request the SDK
server answers by `ServerSpans`, which replaces the SDK's own `OpenTelemetryMiddleware` on the
gateway's tools server. Attributes: `mcp.method.name`, `mcp.protocol.version`, `jsonrpc.request.id`,
`mcp.session.id` (a handshake peer's), `network.transport` (`pipe` on `serve --stdio`, `tcp` on HTTP),
`gen_ai.tool.name` and `gen_ai.operation.name = execute_tool` (tools/call), `gen_ai.prompt.name`,
`mcp.resource.uri`, `agent_sdk.principal` (the principal's id), `agent_sdk.connection` (the upstream
that answered) and `error.type` (`tool_error` for an `isError` result, the JSON-RPC code, or the
exception's type). Never arguments or results, but for a connection the operator opted in
(`trace_content=True`: `gen_ai.tool.call.arguments` and `gen_ai.tool.call.result`, `with_content`).

The parent is the peer's: `params._meta.traceparent` / `tracestate` / `baggage` (SEP-414) when it
holds a valid `traceparent`, else the same HTTP headers; a malformed one is ignored (a new trace
starts). Baggage over the W3C limits (8192 bytes, 180 members, 4096 bytes a member) is cut at the
last whole member that fits, not dropped whole. Each span's duration is also
`mcp.server.operation.duration` (`durations.py`).

Nothing here runs with tracing off: the callers check `tracing_enabled()` (decided once at start-up).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as mt
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from opentelemetry.context import Context, attach, detach
from opentelemetry.propagate import extract
from opentelemetry.trace import SpanKind, StatusCode, get_current_span, get_tracer, set_span_in_context
from pydantic import ValidationError

from connections.serving import tracing_enabled

from ..policy import STDIO
from .durations import record_server

__all__ = [
    "Inbound",
    "ServerSpans",
    "inbound_of_scope",
    "install_server_spans",
    "server_span",
    "trim_baggage",
    "with_content",
]

_tracer = get_tracer("agent-sdk")
_TRACE_HEADERS = (b"traceparent", b"tracestate", b"baggage")
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")
BAGGAGE_BYTES, BAGGAGE_MEMBERS, BAGGAGE_MEMBER_BYTES = 8192, 180, 4096
"""The W3C Baggage limits OpenTelemetry's propagator enforces (it drops a longer header whole)."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """Where a peer's request came from, as its server span says: made only with tracing on."""

    headers: Mapping[str, str]
    """The request's `traceparent`, `tracestate` and `baggage` headers (none on stdio)."""
    session_id: str | None
    transport: Literal["pipe", "tcp"]
    principal: str


def inbound_of_scope(scope: Mapping[str, Any], session_id: str | None, principal: str) -> Inbound:
    """An HTTP request's `Inbound`, from its ASGI scope."""
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"] if k in _TRACE_HEADERS}
    return Inbound(headers, session_id, "tcp", principal)


def _inbound_of_ctx(ctx: ServerRequestContext[Any, Any]) -> Inbound:
    request: Any = ctx.request
    if request is None or not hasattr(request, "scope"):  # `serve --stdio`: its one peer
        return Inbound({}, None, "pipe", STDIO.id)  # the principal its calls and the policy name
    scope = request.scope
    principal = getattr(scope.get("state", {}).get("principal"), "id", None) or "anonymous"
    return inbound_of_scope(scope, request.headers.get("mcp-session-id"), principal)


def trim_baggage(value: str) -> str:
    """`value` cut at the last whole list member within the W3C limits (members over 4096 bytes left out)."""
    if len(value) <= BAGGAGE_BYTES and value.count(",") < BAGGAGE_MEMBERS:
        return value
    kept: list[str] = []
    size = 0
    for member in value.split(","):
        length = len(member.encode())
        if length > BAGGAGE_MEMBER_BYTES:
            continue
        if len(kept) == BAGGAGE_MEMBERS or size + length + (1 if kept else 0) > BAGGAGE_BYTES:
            break
        kept.append(member)
        size += length + (1 if len(kept) > 1 else 0)
    return ",".join(kept)


def _carrier(source: Mapping[str, Any]) -> dict[str, str] | None:
    """The trace keys of `source` (a `_meta` or the headers) when its `traceparent` is a string."""
    if not isinstance(source.get("traceparent"), str):
        return None
    carrier = {k: v for k in _TRACE_KEYS if isinstance(v := source.get(k), str)}
    if "baggage" in carrier:
        carrier["baggage"] = trim_baggage(carrier["baggage"])
    return carrier


def _parent(meta: object, inbound: Inbound | None) -> Context | None:
    """The peer's context: `_meta`'s when valid, else the headers'; None (a new trace) when neither is."""
    for source in (meta if isinstance(meta, Mapping) else None, inbound.headers if inbound else None):
        carrier = _carrier(source) if source else None
        if carrier is None:
            continue
        try:
            context = extract(carrier)
        except (ValueError, TypeError):
            continue
        if get_current_span(context).get_span_context().is_valid:
            return context
    return None


Finished = Callable[[dict[str, Any]], None]


@contextmanager
def server_span(
    method: str,
    target: str | None,
    version: str,
    request_id: object,
    meta: object,
    inbound: Inbound | None,
    connection: str | None = None,
    uri: str | None = None,
) -> Generator[Finished]:
    """The SERVER span of one peer request (module docstring). Yields a function to call with the result
    (an `isError` tools/call result marks the span `tool_error`)."""
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": version}
    if request_id is not None:
        attributes["jsonrpc.request.id"] = str(request_id)
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if target is not None:
            attributes["gen_ai.tool.name"] = target
    elif method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    if uri is not None:
        attributes["mcp.resource.uri"] = uri
    if connection:
        attributes["agent_sdk.connection"] = connection
    transport = inbound.transport if inbound is not None else "tcp"
    attributes["network.transport"] = transport
    if inbound is not None:
        attributes["agent_sdk.principal"] = inbound.principal
        if inbound.session_id:
            attributes["mcp.session.id"] = inbound.session_id
    error: list[str] = []
    started = time.perf_counter()
    parent = _parent(meta, inbound)  # None: the current context's (a new trace when it holds no span)
    span = _tracer.start_span(
        f"{method} {target}" if target else method,
        parent,
        SpanKind.SERVER,
        attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    # Current, with the peer's context, for the span's lifetime: the peer's baggage goes on to the upstreams.
    token = attach(set_span_in_context(span, parent))

    def finished(result: dict[str, Any]) -> None:
        if method == "tools/call" and result.get("isError") is True:
            error.append("tool_error")
            span.set_attribute("error.type", "tool_error")
            span.set_status(StatusCode.ERROR)

    try:
        yield finished
    except MCPError as exc:
        code = str(exc.error.code)
        error.append(code)
        span.set_attributes({"error.type": code, "rpc.response.status_code": code})
        span.set_status(StatusCode.ERROR, exc.error.message)
        raise
    except ValidationError:
        code = str(mt.INVALID_PARAMS)
        error.append(code)
        span.set_attributes({"error.type": code, "rpc.response.status_code": code})
        span.set_status(StatusCode.ERROR, "Invalid request parameters")
        raise
    except BaseException as exc:
        error.append(type(exc).__qualname__)
        span.set_attribute("error.type", error[-1])
        span.set_status(StatusCode.ERROR, type(exc).__qualname__)
        raise
    finally:
        record_server(method, transport, version, time.perf_counter() - started, error[-1] if error else None)
        detach(token)
        span.end()


CONTENT_CHARS = 8192
"""The most of a call's arguments or result (as JSON) put on a span; longer is cut, and says so."""


def with_content(*, arguments: object = None, result: object = None) -> None:
    """A `trace_content=True` connection's call: its arguments or result on the current span, as the GenAI
    conventions' opt-in `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result` (JSON, cut at 8192 chars)."""
    span = get_current_span()
    for key, value in (("gen_ai.tool.call.arguments", arguments), ("gen_ai.tool.call.result", result)):
        if value is None:
            continue
        text = json.dumps(value, ensure_ascii=False, default=str)
        if len(text) > CONTENT_CHARS:
            text = f"{text[:CONTENT_CHARS]}... ({len(text)} chars, cut)"
        span.set_attribute(key, text)


class ServerSpans:
    """The SDK server's middleware opening `server_span` for every request but, with `calls=False`,
    `tools/call` (on the tools server the executor's wrapper spans those)."""

    def __init__(self, *, calls: bool = False) -> None:
        self._skipped = None if calls else "tools/call"

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == self._skipped or ctx.request_id is None:  # the executor spans calls; notifications: none
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name")
        uri = params.get("uri") if ctx.method == "resources/read" else None
        with server_span(
            ctx.method,
            name if isinstance(name, str) and ctx.method in _NAMED else None,
            ctx.protocol_version,
            ctx.request_id,
            params.get("_meta"),
            _inbound_of_ctx(ctx),
            uri=uri if isinstance(uri, str) else None,
        ) as done:
            result = await call_next(ctx)
            if ctx.method == "tools/call":  # a model or its JSON: an `isError` one marks the span
                failed = result.get("isError") if isinstance(result, dict) else getattr(result, "is_error", None)
                done({"isError": failed is True})
            return result


_NAMED = frozenset({"prompts/get", "tools/call"})


def install_server_spans(server: Server[Any], *, calls: bool = False) -> None:
    """`ServerSpans` in place of the SDK's `OpenTelemetryMiddleware` on `server` with tracing on; with it
    off, neither (the SDK's would open a non-recording span on every request). `calls`: `ServerSpans` spans
    `tools/call` too (a server whose calls the executor does not run)."""
    kept = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    server.middleware[:] = [ServerSpans(calls=calls), *kept] if tracing_enabled() else kept
