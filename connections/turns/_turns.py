"""Build one turn's toolset, fail-closed (docs/connections.md).

Order of work for a turn:
1. authored server tools;
2. every per-session `auth` callback of a connection the model can reach, in parallel;
3. every `advertise_tools` connection listed in parallel (auth'd ones through the identity pool's
   client for this session's headers, auth-less ones through the shared pool);
4. names checked (the tool-name rule, collisions with authored tools, between connections and
   within one listing);
5. the attached-connection meta-tools when any attached connection exists.

Any problem in 2-4 fails the whole turn with a `TurnBuildError` listing every problem found.
"""

from __future__ import annotations

import inspect
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as mt
from mcp.shared.inbound import x_mcp_header_map

from .._exceptions import ConnectionsError, TurnBuildError, TurnProblem
from ..client._identity import SessionHeaders, acting_principal
from ..project._definitions import ConnectionDefinition
from ..project._loader import RESERVED_TOOL_NAMES, Project
from ..project._names import NAME_RULE, is_valid_tool_name
from ..project._pin_guard import PinGuard, pinned_names
from ..project._tools import ServerTool, ToolContext
from ._auth_threads import AuthThreads, AuthThreadsBusy
from ._meta_tools import CallTool, ListTools, meta_tools
from ._outcomes import authored_outcome, outcome_from_mcp
from ._session import SessionInfo
from ._toolset import CallObserver, ToolOutcome, Toolset, TurnTool, observed

__all__ = ["TurnBuilder"]

# RFC 9110 §5.1 field-name token; values must not carry CR/LF (header injection).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

DEFAULT_START_WAIT = 120.0
"""Seconds a turn build waits for stdio children still starting (queued for a start slot, or opening)."""


@dataclass(slots=True)
class TurnBuilder:
    """Builds toolsets for a loaded project.

    `list_tools(defn, headers)` / `call_tool(defn, tool, args, headers)` reach the upstream:
    `headers` is None for the shared pool (static headers only) and the evaluated session headers
    (a `SessionHeaders`) for the identity pool. `host` is what authored tools get as `ctx.host` (static headers only).

    Stdio children start in bounded batches (`ClientPool`), so a build waits for a child queued
    behind others up to `start_wait` seconds; one still starting then is a `connection_starting`
    problem (`starting(defn)` tells), and it keeps starting for the next build.
    """

    project: Project
    list_tools: ListTools
    call_tool: CallTool
    host: Any = None
    start_wait: float = DEFAULT_START_WAIT
    starting: Callable[[ConnectionDefinition], bool] | None = None
    observer: CallObserver | None = None
    """Told about every call of every tool this builder builds (the gateway's metrics and log)."""
    pins: PinGuard | None = None
    """Checks each advertised listing against `mcp.lock` (None: nothing is pinned)."""
    _auth_threads: dict[str, AuthThreads] = field(default_factory=dict[str, AuthThreads], init=False, repr=False)

    async def build(self, session: SessionInfo | None, *, hold_back: bool = False) -> Toolset:
        """The turn's exact toolset. Raises `TurnBuildError` naming every problem; never returns fewer tools.

        With `session=None` (surfaces with no session, such as `/v1/mcp/tools`) connections with
        per-session `auth` are left out entirely, as are the attached meta-tools. A tool that differs
        from `mcp.lock` (changed, new, renamed, or one pinned that is gone) is a problem, unless
        `hold_back` (the peer surfaces): then it is left out and named in `Toolset.held_back`.
        """
        toolset, problems = await self.collect(session, hold_back=hold_back)
        if problems:
            raise TurnBuildError(problems)
        return toolset

    async def collect(
        self, session: SessionInfo | None, *, hold_back: bool = False, only: str | None = None
    ) -> tuple[Toolset, list[TurnProblem]]:
        """Like `build`, but returns what could be built plus the problems (for catalogs that report
        failing connections beside the rest). A turn must use `build`. `only` lists that one connection
        (and the authored tools): a direct call opens only the connection that offers its tool."""
        problems: list[TurnProblem] = []
        tools: dict[str, TurnTool] = {}
        for name, authored in self.project.tools.items():
            tools[name] = self._authored(authored, session)

        model_facing = [
            d for d in self.project.connections.values() if not d.host_only and (only is None or d.name == only)
        ]
        if session is None:
            model_facing = [d for d in model_facing if d.auth is None]
        headers = await self._evaluate_auth(model_facing, session, problems)

        advertised = [d for d in model_facing if d.advertise_tools and d.name not in headers.failed]
        # An attached account connection is resolved at the hub on every turn too: a connector the
        # account lacks or a refused API key fails the turn here, not at the model's first call.
        accounts = [d for d in model_facing if d.kind == "account" and not d.advertise_tools] if session else []
        listings = await self._list_all(advertised + accounts, headers.values, problems)

        owners: dict[str, str] = {}
        held: dict[str, str] = {}
        for defn in advertised:
            listing = listings.get(defn.name)
            if listing is None:
                continue
            whose = acting_principal() if defn.grants == "per_principal" else None
            kept = pinned_names(self.pins, defn, listing, held, None if hold_back else problems, whose)
            seen: set[str] = set()
            for tool in listing:
                if not defn.allows_tool(tool.name) or tool.name not in kept:
                    continue
                if not is_valid_tool_name(tool.name):
                    problems.append(
                        TurnProblem(
                            "invalid_tool_name",
                            f"upstream tool name breaks the tool-name rule {NAME_RULE}; "
                            "deny it with deny_tools=[...] or fix the server",
                            connection=defn.name,
                            tool=tool.name[:80],
                        )
                    )
                    continue
                if tool.name in seen:
                    problems.append(
                        TurnProblem(
                            "duplicate_tool",
                            "the upstream lists this tool twice in one tools/list",
                            connection=defn.name,
                            tool=tool.name,
                        )
                    )
                    continue
                seen.add(tool.name)
                if tool.name in self.project.tools:
                    problems.append(
                        TurnProblem(
                            "collision",
                            "collides with the authored tool of the same name in agent/tools/; "
                            "rename the authored tool or deny this one with deny_tools",
                            connection=defn.name,
                            tool=tool.name,
                        )
                    )
                    continue
                if tool.name in owners:
                    problems.append(
                        TurnProblem(
                            "collision",
                            f"also advertised by connection {owners[tool.name]!r}; deny it on one of them "
                            "with deny_tools",
                            connection=defn.name,
                            tool=tool.name,
                        )
                    )
                    continue
                if tool.name in RESERVED_TOOL_NAMES:
                    problems.append(
                        TurnProblem(
                            "collision",
                            "collides with a reserved meta-tool name; deny it with deny_tools",
                            connection=defn.name,
                            tool=tool.name,
                        )
                    )
                    continue
                owners[tool.name] = defn.name
                tools[tool.name] = self._advertised(defn, tool, headers.values.get(defn.name))

        attached = [d for d in model_facing if d.attached and d.name not in headers.failed]
        if session is not None and attached:
            tools.update(meta_tools({d.name: d for d in attached}, headers.values, self.list_tools, self.call_tool))
        # Parallel work finishes in any order; report in a stable one so two runs read the same.
        problems.sort(key=lambda p: (p.connection or "", p.tool or "", p.code))
        if self.observer is not None:
            tools = {name: observed(tool, self.observer) for name, tool in tools.items()}
            if problems:
                self.observer.listing_failed(problems)
        return Toolset(session=session, tools=tools, held_back=held), problems

    def authored(self, name: str, session: SessionInfo | None) -> TurnTool | None:
        """The authored tool `name` as a turn would offer it, or None: no connection is listed for it."""
        tool = self.project.tools.get(name)
        if tool is None:
            return None
        built = self._authored(tool, session)
        return observed(built, self.observer) if self.observer is not None else built

    # -- per-session auth ---------------------------------------------------------------------

    async def _evaluate_auth(
        self, defns: list[ConnectionDefinition], session: SessionInfo | None, problems: list[TurnProblem]
    ) -> _Headers:
        out = _Headers()
        with_auth = [d for d in defns if d.auth is not None]
        if session is None or not with_auth:
            return out

        async def one(defn: ConnectionDefinition) -> None:
            try:
                threads = self._auth_threads.setdefault(defn.name, AuthThreads())
                # Carries the session's id: the identity pool knows which session holds which client.
                out.values[defn.name] = SessionHeaders(await evaluate_auth(defn, session, threads), session.id)
            except _AuthFailure as exc:
                out.failed.add(defn.name)
                problems.append(TurnProblem(exc.code, exc.message, connection=defn.name))

        async with anyio.create_task_group() as tg:
            for defn in with_auth:
                tg.start_soon(one, defn)
        return out

    # -- listing ----------------------------------------------------------------------------

    async def _list_all(
        self,
        defns: list[ConnectionDefinition],
        session_headers: Mapping[str, Mapping[str, str]],
        problems: list[TurnProblem],
    ) -> dict[str, list[mt.Tool]]:
        listings: dict[str, list[mt.Tool]] = {}

        async def one(defn: ConnectionDefinition) -> None:
            # The pools apply the definition's own `connect` and `list` timeouts;
            # this outer bound only guarantees a build never waits on a peer past it. A stdio child may
            # first wait for a start slot behind others (each start bounded by its own timeout), so its
            # bound is the build's `start_wait`, and one still starting is reported as such.
            stdio = defn.kind == "stdio"
            own = defn.timeouts.list + defn.timeouts.connect + 1
            bound = max(self.start_wait, own) if stdio else own
            try:
                with anyio.fail_after(bound):
                    listings[defn.name] = await self.list_tools(defn, session_headers.get(defn.name))
            except TimeoutError:
                if stdio and self.starting is not None and self.starting(defn):
                    problems.append(
                        TurnProblem(
                            "connection_starting",
                            f"the server is still starting after {bound:g}s (children start a few at a time: "
                            "serve --start-limit); it keeps starting, so retry in a moment",
                            connection=defn.name,
                        )
                    )
                    return
                problems.append(
                    TurnProblem(
                        "listing_timeout",
                        f"tools/list did not answer within {defn.timeouts.list:g}s",
                        connection=defn.name,
                    )
                )
            except ConnectionsError as exc:
                # The problem names the connection already: keep "connection 'x': " out of its message.
                detail = getattr(exc, "detail", None) or str(exc).removeprefix(f"connection {defn.name!r}: ")
                problems.append(TurnProblem(exc.code, f"tools/list failed: {detail}", connection=defn.name))

        async with anyio.create_task_group() as tg:
            for defn in defns:
                tg.start_soon(one, defn)
        return listings

    # -- tool wrappers ----------------------------------------------------------------------

    def _authored(self, tool: ServerTool, session: SessionInfo | None) -> TurnTool:
        async def invoke(arguments: Mapping[str, Any]) -> ToolOutcome:
            ctx = ToolContext(host=self.host, session=session, call_id=f"tool_{tool.name}_{uuid.uuid4().hex[:12]}")
            return authored_outcome(await tool.run(dict(arguments), ctx))

        return TurnTool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
            annotations={"readOnlyHint": True} if tool.effect == "read" else None,
            effect=tool.effect,
            title=tool.title,
            source="extension" if "__" in tool.name else "authored",
            invoke=invoke,
            header_params=bool(x_mcp_header_map(tool.input_schema)),
        )

    def _advertised(self, defn: ConnectionDefinition, tool: mt.Tool, headers: Mapping[str, str] | None) -> TurnTool:
        call = self.call_tool

        async def invoke(arguments: Mapping[str, Any]) -> ToolOutcome:
            return outcome_from_mcp(await call(defn, tool.name, arguments, headers))

        annotations = (
            tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True) if tool.annotations else None
        )
        read_only = bool(tool.annotations and tool.annotations.read_only_hint)
        return TurnTool(
            name=tool.name,
            description=tool.description or "",
            input_schema=tool.input_schema,
            output_schema=tool.output_schema,
            annotations=annotations,
            effect="read" if read_only else None,
            title=tool.title or (tool.annotations.title if tool.annotations else None),
            source="advertised",
            connection=defn.name,
            invoke=invoke,
            header_params=bool(x_mcp_header_map(tool.input_schema)),
            execution=tool.execution.model_dump(mode="json", by_alias=True, exclude_none=True)
            if tool.execution
            else None,
        )


@dataclass(slots=True)
class _Headers:
    values: dict[str, dict[str, str]]
    failed: set[str]

    def __init__(self) -> None:
        self.values = {}
        self.failed = set()


class _AuthFailure(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def evaluate_auth(defn: ConnectionDefinition, session: SessionInfo, threads: AuthThreads) -> dict[str, str]:
    """Run `defn.auth(session)` under its timeout (a sync callback on one of `threads`); the headers
    it returns, checked.

    Raises `_AuthFailure` with a sentence naming what is wrong, never a header value.
    """
    callback = defn.auth
    assert callback is not None
    try:
        with anyio.fail_after(defn.timeouts.auth):
            if _is_async(callback):
                value = await callback(session)  # type: ignore[misc]
            else:
                value = await threads.run(callback, session)
                if hasattr(value, "__await__"):
                    value = await value
    except AuthThreadsBusy:
        raise _AuthFailure(
            "auth_busy",
            f"{threads.limit} earlier calls of the auth callback are still running (hung?); "
            "the turn does not run without its identity",
        ) from None
    except TimeoutError:
        raise _AuthFailure("auth_timeout", f"the auth callback did not return within {defn.timeouts.auth:g}s") from None
    except Exception as exc:  # boundary: user code; report the type only, messages may hold secrets
        raise _AuthFailure(
            "auth_failed", f"the auth callback raised {type(exc).__name__}; the turn does not run without its identity"
        ) from None
    return _checked_headers(value)


def _is_async(fn: Any) -> bool:
    # A callable object with an `async def __call__` counts as async too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


def _checked_headers(value: Any) -> dict[str, str]:
    shape = "the auth callback must return {'headers': {name: value, ...}} with string names and values"
    if not isinstance(value, Mapping) or "headers" not in value:
        raise _AuthFailure("auth_malformed", f"{shape}; it returned {type(value).__name__}")
    headers: Any = value["headers"]
    if not isinstance(headers, Mapping):
        raise _AuthFailure("auth_malformed", f"{shape}; 'headers' is {type(headers).__name__}")
    out: dict[str, str] = {}
    for key, val in headers.items():
        if not isinstance(key, str) or not _HEADER_NAME.fullmatch(key):
            raise _AuthFailure("auth_malformed", f"{shape}; header name {str(key)[:40]!r} is not a valid name")
        if not isinstance(val, str):
            raise _AuthFailure("auth_malformed", f"{shape}; header {key!r} has a {type(val).__name__} value")
        if "\r" in val or "\n" in val or "\x00" in val:
            raise _AuthFailure("auth_malformed", f"header {key!r} holds a line break or NUL, which HTTP forbids")
        out[key] = val
    return out
