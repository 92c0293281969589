"""The tools one caller may see on `/v1/mcp/tools` and `serve --stdio`: listed live, fail-closed, after the policy.

`tools/list` (`tools.tools_list_result`) answers with them, and discovery mode (`discovery.py`) searches them.
"""

from __future__ import annotations

from typing import Protocol

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections import Project, Toolset, TurnBuildError, TurnProblem, acting_for

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
    services: ListingServices, caller: Principal, method: str = "tools/list", server: str = ""
) -> tuple[Toolset, list[TurnProblem]]:
    """The live toolset as `caller` may see it (the policy's filter), and the problems of the connections set
    aside (`set_aside`: a per-user one `caller` has not signed in to, an `optional=True` one that is down).
    Any other problem fails it closed: raises `MCPError` naming the connections that could not be listed (with
    a sign-in link where one helps), never a shorter list. `server`: the curated server it is for
    (`context.server`)."""
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
    return visible_tools(services.policy, caller, toolset, server)[0], aside
