"""The tools one caller may see on `/v1/mcp/tools` and `serve --stdio`: listed live, fail-closed, after the policy.

`tools/list` (`tools.tools_list_result`) answers with them, and discovery mode (`discovery.py`) searches them,
with one more kind (`signed_out`): the tools `mcp.lock` pins for a per-user connection the caller has not signed
in to yet, so a search finds them before the sign-in their call asks for (docs/discovery.md, "Per-person
connections").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections import Project, Toolset, TurnBuildError, TurnProblem, TurnTool, acting_for
from connections.serving import SignInRequired

from ..auth.chain import Principal
from ..policy import PolicyGate, visible_tools
from ..settings import ServeSettings
from ..state.request_state import RequestStates
from .sign_in import SignInLinks, set_aside
from .toolsets import ToolCatalog

__all__ = ["ListingServices", "failed_closed", "visible_listing"]


class ListingServices(Protocol):
    @property
    def catalog(self) -> ToolCatalog: ...

    @property
    def policy(self) -> PolicyGate: ...

    @property
    def settings(self) -> ServeSettings: ...

    @property
    def request_states(self) -> RequestStates: ...

    @property
    def project(self) -> Project: ...


def failed_closed(method: str, exc: TurnBuildError) -> MCPError:
    """A listing that failed closed (`tools/list` too): -32603 naming every connection in its message,
    each problem in `data.problems`."""
    names = sorted({p.connection for p in exc.problems if p.connection})
    return MCPError(
        mt.INTERNAL_ERROR,
        f"{method} failed closed: connection(s) {', '.join(names) or '?'}: " + "; ".join(str(p) for p in exc.problems),
        data={"error": exc.code, "problems": [p.to_json() for p in exc.problems]},
    )


async def visible_listing(
    services: ListingServices,
    caller: Principal,
    method: str = "tools/list",
    server: str = "",
    *,
    signed_out: bool = False,
) -> tuple[Toolset, list[TurnProblem]]:
    """The live toolset as `caller` may see it (the policy's filter), and the problems of the connections set
    aside (`set_aside`: a per-user one `caller` has not signed in to, an `optional=True` one that is down).
    Any other problem fails it closed: raises `MCPError` naming the connections that could not be listed (with
    a sign-in link where one helps), never a shorter list. `server`: the curated server it is for
    (`context.server`). `signed_out`: with the tools `mcp.lock` pins for each per-user connection set aside
    (`signed_out_tools`), before the policy like the rest."""
    with acting_for(caller.id):
        toolset, problems = await services.catalog.collect(None)
    aside = [p for p in problems if set_aside(p, services.project.connections)]
    if len(aside) < len(problems):
        exc = TurnBuildError(problems)
        refusal = failed_closed(method, exc)
        signs = SignInLinks(services.settings, services.request_states).for_problems(exc.problems, caller.id)
        if signs:
            urls = "; ".join(s.get("command") or f"sign in to {s['connection']} at {s['url']}" for s in signs)
            data = {**(refusal.error.data or {}), "signIn": signs}
            raise MCPError(refusal.error.code, f"{refusal.error.message}; {urls}", data=data) from None
        raise refusal from None
    if signed_out:
        toolset = signed_out_tools(services, caller, toolset, aside)
    return visible_tools(services.policy, caller, toolset, server)[0], aside


def signed_out_tools(
    services: ListingServices, caller: Principal, toolset: Toolset, aside: list[TurnProblem]
) -> Toolset:
    """`toolset` and, for each per-user connection `caller` must sign in to, the tools `mcp.lock` pins for it
    (the operator's reviewed definitions: `agent-sdk pin --principal`), a name already listed left as it is.
    Calling one raises that `SignInRequired` (the executor answers with `caller`'s sign-in link)."""
    pins = services.catalog.builder.pins
    signing = sorted({p.connection for p in aside if p.code == SignInRequired.code and p.connection})
    if pins is None or not signing:
        return toolset
    tools = dict(toolset.tools)
    for connection in signing:
        for data in pins.pinned_tools(connection):
            name = data.get("name")
            if isinstance(name, str) and name not in tools:
                tools[name] = _signed_out(connection, caller.id, data)
    return Toolset(session=toolset.session, tools=tools, held_back=toolset.held_back)


def _signed_out(connection: str, principal: str, data: Mapping[str, Any]) -> TurnTool:
    async def invoke(arguments: Mapping[str, Any]) -> Any:
        raise SignInRequired(connection, principal, f"connection {connection!r} needs your own sign-in")

    def mapping(key: str) -> Mapping[str, Any] | None:
        value = data.get(key)
        return value if isinstance(value, Mapping) else None

    annotations = mapping("annotations")
    title = data.get("title") or (annotations or {}).get("title")
    return TurnTool(
        name=str(data["name"]),
        description=str(data.get("description") or ""),
        input_schema=mapping("inputSchema") or {"type": "object"},
        output_schema=mapping("outputSchema"),
        annotations=annotations,
        effect="read" if (annotations or {}).get("readOnlyHint") is True else None,
        title=title if isinstance(title, str) else None,
        source="advertised",
        connection=connection,
        invoke=invoke,
        execution=mapping("execution"),
    )
