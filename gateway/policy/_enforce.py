"""What each surface asks the gate, in the shapes the surfaces hold (toolsets, listings, names).

A listed item is shown to a principal exactly when it may perform the item's own method on it (a tool
when it may `tools/call` it, a resource when it may `resources/read` it, a prompt when it may
`prompts/get` it); a principal denied the listing action itself (`tools/list`, ...) is shown nothing.
Held-back tools (`mcp.lock`) are not named to a principal under a policy: their names would say what
exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from connections import NotOffered, SessionInfo, Toolset, TurnProblem, TurnTool
from connections.serving import not_offered

from ..auth.chain import Principal
from ._decide import PolicyGate, Refusal
from ._entities import Target, prompt_target, resource_target, tool_target
from ._meta_tools import guarded_meta_tool

__all__ = [
    "Catalog",
    "as_principal",
    "callable_tool",
    "hidden",
    "may_call",
    "refused",
    "tools_shown",
    "turn_toolset",
    "visible_items",
    "visible_tools",
]

_Item = TypeVar("_Item", bound=Mapping[str, Any])
_ITEM = {
    "resources/list": ("uri", "resources/read", False),
    "resources/templates/list": ("uriTemplate", "resources/read", True),
    "prompts/list": ("name", "prompts/get", False),
}


def may_call(gate: PolicyGate, principal: Principal, tool: TurnTool) -> bool:
    """The one decision of a tool call: may `principal` `tools/call` this tool?"""
    return gate.decide(principal, "tools/call", tool_target(tool)).allowed


class Catalog(Protocol):
    """The gateway's `ToolCatalog`, as far as a call's tool is looked up in it."""

    async def tool(
        self, name: str, session: SessionInfo | None = None
    ) -> tuple[TurnTool | None, Toolset, list[TurnProblem]]: ...

    async def collect(self, session: SessionInfo | None) -> tuple[Toolset, list[TurnProblem]]: ...


async def callable_tool(
    gate: PolicyGate,
    principal: Principal,
    catalog: Catalog,
    name: str,
    session: SessionInfo | None = None,
    surface: str | None = None,
    server: str = "",
) -> tuple[TurnTool | None, Toolset, list[TurnProblem]]:
    """`catalog.tool(name, session)` as `principal` may see it: the tool when it may call it (one decision); a
    hidden one as an unknown name is found (None, the whole listing narrowed to what `principal` may see, its
    problems), so that the refusal of a hidden tool is the refusal of an unknown one, word for word. Both are
    told to the audit trail (`refused`), an unknown name as `unknown_tool` (or `tool_held_back`)."""
    tool, toolset, problems = await catalog.tool(name, session)
    if tool is not None and gate.enforcing:
        decision = gate.decide(principal, "tools/call", tool_target(tool), server)
        if decision.allowed:
            return guarded_meta_tool(gate, principal, tool, tools_shown), toolset, problems
        refused(gate, principal, Refusal("tools/call", tool.name, tool.connection, decision.policies), surface)
        # found without a listing (an authored tool, a reused one): list as for an unknown name
        toolset, problems = await catalog.collect(session)
        return None, visible_tools(gate, principal, toolset, server)[0], problems
    if tool is None and not problems:  # not a listing that failed: a name no listing holds
        reason = "tool_held_back" if name in toolset.held_back else "unknown_tool"
        refused(gate, principal, Refusal("tools/call", name[:200], reason=reason), surface)
    if not gate.enforcing:
        return tool, toolset, problems
    return None, visible_tools(gate, principal, toolset, server)[0], problems


def refused(gate: PolicyGate, principal: Principal, refusal: Refusal, surface: str | None = None) -> None:
    """Tell the audit trail (`gate.on_denied_call`) of a request answered as for a name that does not exist."""
    if gate.on_denied_call is not None:
        gate.on_denied_call(principal, refusal, surface)


def hidden(
    gate: PolicyGate, principal: Principal, action: str, target: Target, *also: Target, server: str = ""
) -> NotOffered | None:
    """The refusal for a resource or prompt the policy hides from `principal` (`target`, or any of `also`: the
    templates a resource is an instance of) through curated server `server` ("" for none): the very sentence
    of one that does not exist or that no advertised connection offers (`not_offered`), so that hiding it says
    nothing; else None. A refusal is told to the audit trail (`refused`) against `target`."""
    for each in (target, *also):
        decision = gate.decide(principal, action, each, server)
        if not decision.allowed:
            refused(gate, principal, Refusal(action, target.id, policies=decision.policies))
            return NotOffered(not_offered(_kind(action, target), target.id))
    return None


def _kind(action: str, target: Target) -> str:
    """What `not_offered` calls `target`: a prompt, a resource, or (for a completion) a resource template."""
    if target.type == "AgentSdk::Prompt":
        return "prompt"
    return "resource template" if action == "completion/complete" else "resource"


def tools_shown(
    gate: PolicyGate,
    principal: Principal,
    targets: Sequence[Target],
    *,
    operators_see_all: bool = False,
    server: str = "",
) -> list[bool]:
    """Which of the tools `targets` (`tool_target`, `named_tool_target`) a listing shows `principal`: those it
    may `tools/call`, none when it may not `tools/list`, all without a policy file. Every surface that names
    tools (MCP `tools/list`, `/v1/tools`, `/v1/connections`, `/v1/info`) asks this one question; the status
    surfaces (`operators_see_all`) show an operator everything, as it configures the deployment. `server`: the
    curated server the listing is for (`context.server`)."""
    if not gate.enforcing or (operators_see_all and principal.is_operator):
        return [True] * len(targets)
    if not gate.decide(principal, "tools/list", server=server).allowed:
        return [False] * len(targets)
    return gate.visible(principal, "tools/call", targets, server)


def visible_tools(gate: PolicyGate, principal: Principal, toolset: Toolset, server: str = "") -> tuple[Toolset, int]:
    """`toolset` as `principal` may see it (through curated server `server`, "" for none), and how many tools
    the policy hid (0 without a policy file)."""
    if not gate.enforcing:
        return toolset, 0
    tools = sorted(toolset, key=lambda t: t.name)
    shown = tools_shown(gate, principal, [tool_target(t) for t in tools], server=server)
    kept = {
        t.name: guarded_meta_tool(gate, principal, t, tools_shown) for t, ok in zip(tools, shown, strict=True) if ok
    }
    return Toolset(session=toolset.session, tools=kept), len(tools) - len(kept)


def visible_items(
    gate: PolicyGate, principal: Principal, method: str, items: Sequence[_Item], server: str = ""
) -> list[_Item]:
    """The items of a `resources/list`, `resources/templates/list` or `prompts/list` listing `principal` may see
    (through curated server `server`, "" for none)."""
    if not gate.enforcing:
        return list(items)
    if not gate.decide(principal, method, server=server).allowed:
        return []
    key, action, template = _ITEM[method]
    names = [str(item.get(key, "")) for item in items]
    targets = [prompt_target(n) if action == "prompts/get" else resource_target(n, template=template) for n in names]
    return [item for item, ok in zip(items, gate.visible(principal, action, targets, server), strict=True) if ok]


_KINDS = {"bearer": "bearer", "oauth": "oauth", "loopback": "loopback", "stdio": "loopback"}


def as_principal(value: object, owner: str) -> Principal:
    """The principal a session's turn runs for: the request's `Principal`, else one named by the owner's id
    (its kind from the id's prefix; no claims, so a policy on claims denies it: fail closed)."""
    if isinstance(value, Principal):
        return value
    kind: Any = _KINDS.get(owner.split(":", 1)[0], "anonymous")
    return Principal(owner, kind)


def turn_toolset(gate: PolicyGate, session: SessionInfo, toolset: Toolset) -> tuple[Toolset, dict[str, Any]]:
    """A turn's toolset narrowed to what its session's principal may call, and what `turn.started` says: under a
    policy, `{"policy": {"toolsHidden": n}}` (0 included, so a narrowed toolset is never silent)."""
    if not gate.enforcing:
        return toolset, {}
    principal = as_principal(session.principal, str(session.auth or "anonymous"))
    kept, hidden = visible_tools(gate, principal, toolset)
    return kept, {"policy": {"toolsHidden": hidden, "tools": len(kept)}}
