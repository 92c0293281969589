"""The one executor of a peer's `tools/call` on `/v1/mcp/tools`, on `serve --stdio` and through the SDK's manager.

Every entry reads and checks the request its own way (the lane on HTTP: `gateway/mcp/lane.py`; the
SDK's session on `serve --stdio` and for what the lane leaves to the SDK: `tools.tools_server`),
resolves the tool once (`resolve`) and makes one immutable `CallPlan`: the request id, the tool and
its connection, the arguments, the principal, the protocol generation, what the caller asked for
besides the result (`CallRequest`: progress token, log level, the `elicitation` / `sampling` it
declared) and how the answer is written (`json`, `sse`, or `session`: the SDK's own session). Then
`Executor.execute(plan, channel)` runs it; `channel` is the answer writer's way back to the peer
(`connections.serving.CallChannel`: notify, ask, cancel), implemented once per writer
(`call_stream.JsonAnswer`, `call_stream.SseAnswer`, `session_answer.SessionAnswer`).

Wrappers: `Executor.wrap(wrapper)` puts `wrapper(plan, channel, call_next)` around every call, the
first added outermost. This is the one place for what must see every call (tracing is the first:
`traced`, added only when tracing is on; policy and audit go here too). No wrapper picks another
lane: turning one on never changes what a peer gets. docs/architecture.md lists the pipeline.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections import ConnectionsError, ToolInputError, ToolOutcome, TurnTool, UpstreamError, acting_for
from connections.serving import CallChannel, CallRequest, calling

from ..telemetry.spans import Inbound, server_span
from .peers.input import InputServices, peer_input
from .toolsets import ToolCatalog, missing_tool

__all__ = ["AnswerMode", "CallPlan", "Execute", "Executor", "Wrapper", "resolve", "traced"]

AnswerMode = Literal["json", "sse", "session"]
_COMPLETE = "complete"


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One `tools/call`, read, checked and resolved (module docstring)."""

    request_id: str | int | None
    target: TurnTool
    arguments: Mapping[str, Any] | None
    params: Mapping[str, Any]
    """The schema-checked params (`_meta`, a 2026-07-28 retry's `requestState` and `inputResponses`)."""
    principal: str
    version: str
    modern: bool
    request: CallRequest
    answer: AnswerMode
    inbound: Inbound | None = None
    """Where the request came from, for its server span: set only with tracing on (`gateway/telemetry/spans.py`)."""


Execute = Callable[[CallPlan, CallChannel], Awaitable[dict[str, Any]]]
Wrapper = Callable[[CallPlan, CallChannel, Execute], Awaitable[dict[str, Any]]]


class Executor:
    """Runs plans: the call, as the peer's `CallToolResult` JSON (not yet shaped for its version), inside
    the wrappers (module docstring)."""

    __slots__ = ("_run", "_services", "wrappers")

    def __init__(self, services: InputServices) -> None:
        self._services = services
        self.wrappers: tuple[Wrapper, ...] = ()
        self._run: Execute = self._call

    def wrap(self, wrapper: Wrapper) -> None:
        """Put `wrapper` around every call from now on, inside the wrappers added before it."""
        self.wrappers = (*self.wrappers, wrapper)
        run: Execute = self._call
        for outer in reversed(self.wrappers):
            run = _wrapped(outer, run)
        self._run = run

    async def execute(self, plan: CallPlan, channel: CallChannel) -> dict[str, Any]:
        """The call's `CallToolResult` JSON. Raises `MCPError` for the upstream's -32042 (URL elicitation
        required) and a refused retry; a failing tool is an error result."""
        return await self._run(plan, channel)

    async def _call(self, plan: CallPlan, channel: CallChannel) -> dict[str, Any]:
        context, peer = await peer_input(
            self._services, plan.principal, plan.target, plan.params, plan.request, channel, modern=plan.modern
        )
        tool, arguments, principal = plan.target, plan.arguments, plan.principal

        async def call() -> ToolOutcome:
            with acting_for(principal):
                return await tool.call(arguments)

        try:
            if peer is not None:
                result = peer.finish(await peer.run(call))
            elif context is None:
                result = (await call()).mcp_result()
            else:
                with calling(context):
                    result = (await call()).mcp_result()
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


def _wrapped(wrapper: Wrapper, call_next: Execute) -> Execute:
    async def run(plan: CallPlan, channel: CallChannel) -> dict[str, Any]:
        return await wrapper(plan, channel, call_next)

    return run


async def resolve(catalog: ToolCatalog, name: str, found: tuple[Any, ...] | None = None) -> TurnTool:
    """The server tool `name` (from `found`, the catalog's `tool(name)` answer, when the caller has it).
    Raises `MCPError` (invalid params) for an unknown tool and for one `mcp.lock` holds back (its
    sentence says what changed)."""
    tool, toolset, problems = found if found is not None else await catalog.tool(name, None)
    if tool is not None:
        return tool
    held = toolset.held_back.get(name)
    if held is not None:
        raise MCPError(mt.INVALID_PARAMS, f"Tool {name[:64]!r} is held back: {held}", data={"error": "tool_held_back"})
    refusal = missing_tool(name, toolset.names(), problems)
    message = f"Unknown tool: {name[:64]}" if not problems else refusal.message
    raise MCPError(mt.INVALID_PARAMS, message, data={"error": refusal.code, **refusal.extra})


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": _COMPLETE}


def _failure_result(exc: Exception) -> dict[str, Any]:
    """What the peer sees when a tool call raised: an error result, never a JSON-RPC error."""
    if isinstance(exc, ToolInputError):
        return _error_result(str(exc))
    if isinstance(exc, ConnectionsError):
        return _error_result(f"{exc.code}: {exc}")
    return _error_result(f"{type(exc).__name__}: {exc}"[:500])


async def traced(plan: CallPlan, channel: CallChannel, call_next: Execute) -> dict[str, Any]:
    """The tracing wrapper (the runtime adds it only with tracing on): the call runs in its server span
    (`gateway/telemetry/spans.py`), whichever front and answer it took."""
    target = plan.target
    with server_span(
        "tools/call", target.name, plan.version, plan.request_id, plan.params.get("_meta"), plan.inbound,
        connection=target.connection,
    ) as done:  # fmt: skip
        result = await call_next(plan, channel)
        done(result)
        return result
