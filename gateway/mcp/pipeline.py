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
from typing import Any, Literal, Protocol

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_INFO_META_KEY

from connections import (
    ConnectionsError,
    Project,
    ToolInputError,
    ToolOutcome,
    Toolset,
    TurnProblem,
    TurnTool,
    UpstreamError,
    acting_for,
)
from connections.serving import CallChannel, CallRequest, SignInRequired, calling

from ..audit import CallGuard, refusal_rpc_error
from ..auth.chain import Principal
from ..errors import CallRefused
from ..http.request_ids import note_client
from ..policy import PolicyGate, callable_tool
from ..settings import ServeSettings
from ..telemetry.spans import Inbound, server_span, with_content
from .call_stream import JsonAnswer
from .curated import CuratedView, unknown_tool
from .discovery import DiscoveryView, MetaTool
from .peers.input import InputServices, declared_input, peer_input
from .sign_in import SignInLinks, sign_in_answer
from .toolsets import ToolCatalog, missing_tool
from .visible import visible_listing

__all__ = [
    "AnswerMode",
    "CallPlan",
    "Execute",
    "Executor",
    "ExecutorServices",
    "Wrapper",
    "lookup",
    "resolve",
    "target_of",
    "traced",
    "view_target",
]

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
    """Whose call it is (`acting_for`): the owner of its identity, grants, held calls and audit record."""
    caller: Principal
    """Whom the policy decided for (the principal with its claims)."""
    version: str
    modern: bool
    request: CallRequest
    answer: AnswerMode
    inbound: Inbound | None = None
    """Where the request came from, for its server span: set only with tracing on (`gateway/telemetry/spans.py`)."""
    view: CuratedView | None = None
    """The curated server the call came through (`gateway/mcp/curated.py`): `target` is the real tool."""
    served_as: str | None = None
    """The name the view showed `target` under."""


class ExecutorServices(InputServices, Protocol):
    """What the executor needs from the app besides the peers' input: the catalog, the policy, the guard
    (audit, limits, approval) and where sign-in links point."""

    @property
    def catalog(self) -> ToolCatalog: ...

    @property
    def policy(self) -> PolicyGate: ...

    @property
    def guard(self) -> CallGuard | None: ...

    @property
    def settings(self) -> ServeSettings: ...

    @property
    def discovery(self) -> DiscoveryView | None: ...

    @property
    def project(self) -> Project: ...


Execute = Callable[[CallPlan, CallChannel], Awaitable[dict[str, Any]]]
Wrapper = Callable[[CallPlan, CallChannel, Execute], Awaitable[dict[str, Any]]]


class Executor:
    """Runs plans: the call, as the peer's `CallToolResult` JSON (not yet shaped for its version), inside
    the wrappers (module docstring)."""

    __slots__ = ("_run", "_services", "wrappers")

    def __init__(self, services: ExecutorServices) -> None:
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
        services = self._services
        context, peer = await peer_input(
            services, plan.principal, plan.target, plan.params, plan.request, channel, modern=plan.modern
        )
        tool, arguments, principal = plan.target, plan.arguments, plan.principal
        if plan.modern:  # the peer's clientInfo, for an approval of this call to show
            note_client(plan.params.get("_meta", {}).get(CLIENT_INFO_META_KEY))
        if services.guard is not None and not isinstance(tool, (_SignInFirst, MetaTool)):  # audit, limits, approval
            who = plan.caller if plan.caller.id == principal else principal
            if plan.view is None:
                tool = services.guard.tool(tool, None, who)
            else:
                tool = services.guard.tool(
                    tool, plan.view.surface, who, served_as=plan.served_as, server=plan.view.name
                )

        async def call() -> ToolOutcome:
            with acting_for(principal):
                return await tool.call(arguments)

        outcome: ToolOutcome | None = None
        try:
            if peer is not None:
                result = peer.finish(await peer.run(call))
            elif context is None:
                outcome = await call()
                result = outcome.mcp_result()
            else:
                with calling(context):
                    outcome = await call()
                    result = outcome.mcp_result()
        except CallRefused as exc:
            raise refusal_rpc_error(exc) from None
        except SignInRequired as exc:  # the caller's own grant is missing: a way to sign in, never a smaller answer
            return self._signing_in(exc, plan)
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
        upstream = outcome.upstream if outcome is not None else None
        if upstream is not None and upstream.text is not None and type(channel) is JsonAnswer:  # not SSE: not spliced
            channel.keep(result, upstream)  # its bytes may be spliced into the answer (`lane.py`)
        return result

    def _signing_in(self, exc: SignInRequired, plan: CallPlan) -> dict[str, Any]:
        services = self._services
        declared = declared_input(plan.params) if plan.modern else (plan.request.capabilities or {})
        links = SignInLinks(services.settings, services.request_states)
        return sign_in_answer(
            links, services.request_states, exc, tool=plan.target.name, capabilities=declared, modern=plan.modern
        )


def _wrapped(wrapper: Wrapper, call_next: Execute) -> Execute:
    async def run(plan: CallPlan, channel: CallChannel) -> dict[str, Any]:
        return await wrapper(plan, channel, call_next)

    return run


@dataclass(frozen=True, slots=True)
class _SignInFirst(TurnTool):
    """`target_of`'s stand-in for a tool `caller` cannot reach before signing in (no audit, limit or approval:
    nothing runs)."""


Found = tuple[TurnTool | None, Toolset, list[TurnProblem]]


async def lookup(services: ExecutorServices, name: str, caller: Principal, server: str = "") -> Found:
    """The catalog's answer for tool `name` as `caller` may see it (through curated server `server`, "" for
    none: a tool the policy hides is not there); a listing it needs first is `caller`'s (its per-user grants)."""
    with acting_for(caller.id):
        return await callable_tool(services.policy, caller, services.catalog, name, None, None, server)


async def resolve(
    services: ExecutorServices, name: str, caller: Principal, found: Found | None = None, server: str = ""
) -> TurnTool:
    """The server tool `name` for `caller`'s call (from `found`, `lookup`'s answer, when the caller has it).
    Raises `MCPError` (invalid params) for an unknown tool, one the policy hides from `caller` (the same
    answer) and one `mcp.lock` holds back (its sentence says what changed), and `SignInRequired` when
    `caller` must sign in to a per-user connection to list it."""
    tool, toolset, problems = found if found is not None else await lookup(services, name, caller, server)
    if tool is not None:
        return tool
    signing = [p for p in problems if p.code == SignInRequired.code and p.connection]
    if signing:  # the tool may be one of those connections': the one a listing or the lock says, else the first
        owner = services.catalog.owner(name)
        chosen = next((p for p in signing if p.connection == owner), signing[0])
        assert chosen.connection is not None
        raise SignInRequired(chosen.connection, caller.id, chosen.message)
    held = toolset.held_back.get(name)
    if held is not None:
        raise MCPError(mt.INVALID_PARAMS, f"Tool {name[:64]!r} is held back: {held}", data={"error": "tool_held_back"})
    refusal = missing_tool(name, toolset.names(), problems)
    message = f"Unknown tool: {name[:64]}" if not problems else refusal.message
    raise MCPError(mt.INVALID_PARAMS, message, data={"error": refusal.code, **refusal.extra})


async def target_of(
    services: ExecutorServices, name: str, caller: Principal, found: Found | None = None, server: str = ""
) -> TurnTool:
    """`resolve`'s tool, or, where `caller` must sign in first, a stand-in whose call raises that
    `SignInRequired`: the executor answers it with a way to sign in, as it does when the grant goes
    missing mid-call (`sign_in.py`). In discovery mode, `search_tools` and `describe_tool` are the view's
    meta-tools over what `caller` may see (`discovery.py`)."""
    view = services.discovery

    async def visible() -> Toolset:
        return (await visible_listing(services, caller, "tools/call", signed_out=True))[0]

    meta = view.tool(name, visible) if view is not None else None
    if meta is not None:
        return meta
    try:
        return await resolve(services, name, caller, found, server)
    except SignInRequired as exc:
        missing = exc

        async def signing_in(_arguments: Mapping[str, Any]) -> ToolOutcome:
            raise missing

        return _SignInFirst(
            name=name,
            description="",
            input_schema={"type": "object"},
            source="advertised",
            invoke=signing_in,
            connection=exc.connection,
        )


async def view_target(
    services: ExecutorServices,
    view: CuratedView,
    name: str,
    caller: Principal,
    arguments: Mapping[str, Any] | None,
    found: Found | None = None,
) -> tuple[TurnTool, dict[str, Any]]:
    """The real tool behind the view's tool `name` for `caller` (`target_of`, decided with the view's name as
    `context.server`) and the real call's arguments (the view's fixed ones in). A name the view does not show,
    or whose real tool `caller` may not see, is refused in the view's name, as an unknown tool."""
    if view.discovery is not None:  # its meta-tools over what it shows `caller` (`discovery.py`)

        async def shown() -> Toolset:
            return view.shown((await visible_listing(services, caller, "tools/call", view.name))[0])

        meta = view.discovery.tool(name, shown)
        if meta is not None:
            return meta, dict(arguments or {})
    real = view.real_name(name)
    try:
        target = await target_of(services, real, caller, found, view.name)
    except MCPError as exc:
        data = exc.error.data
        if isinstance(data, Mapping) and data.get("error") == "unknown_tool":
            raise unknown_tool(name) from None
        raise
    if isinstance(target, _SignInFirst):  # nothing runs: the caller signs in first
        return target, dict(arguments or {})
    return target, view.arguments(target, name, arguments)


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": _COMPLETE}


def _failure_result(exc: Exception) -> dict[str, Any]:
    """What the peer sees when a tool call raised: an error result, never a JSON-RPC error."""
    if isinstance(exc, ToolInputError):
        return _error_result(str(exc))
    if isinstance(exc, ConnectionsError):
        return _error_result(f"{exc.code}: {exc}")
    return _error_result(f"{type(exc).__name__}: {exc}"[:500])


def traced(content_of: frozenset[str] = frozenset()) -> Wrapper:
    """The tracing wrapper (the runtime adds it only with tracing on): the call runs in its server span
    (`gateway/telemetry/spans.py`), whichever front and answer it took. The connections in `content_of`
    (`trace_content=True`) also put the call's arguments and result on it."""

    async def trace_call(plan: CallPlan, channel: CallChannel, call_next: Execute) -> dict[str, Any]:
        target = plan.target
        with server_span(
            "tools/call", target.name, plan.version, plan.request_id, plan.params.get("_meta"), plan.inbound,
            connection=target.connection,
        ) as done:  # fmt: skip
            if target.connection in content_of:
                with_content(arguments=plan.arguments)
            result = await call_next(plan, channel)
            if target.connection in content_of:
                with_content(result=result)
            done(result)
            return result

    return trace_call
