"""The attached-connection meta-tools under a policy: each inner tool decided as an advertised one is.

`mcp_list_tools` and `mcp_call_tool` (`connections/turns/_meta_tools.py`) reach the tools of connections that
are neither advertised nor host-only. Decided only by their own names (authored-looking: no connection), they
would list and call any of those tools for a principal the policy permits the meta-tools. So, under a policy,
`mcp_list_tools` lists only the tools `principal` may call (`tools_shown`), and `mcp_call_tool` refuses any
other with the sentence of a tool the definition does not allow. The inner tool is decided as
`AgentSdk::Tool::"<name>"` of its connection; a call knows no annotations, so it is decided with MCP's
defaults (not read-only, destructive): a policy that permits read-only tools only refuses it (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from connections import ToolInputError, ToolOutcome, TurnTool

from ..auth.chain import Principal
from ._decide import PolicyGate, Refusal
from ._entities import Target, named_tool_target

__all__ = ["guarded_meta_tool"]

Shown = Callable[[PolicyGate, Principal, Sequence[Target]], list[bool]]


def guarded_meta_tool(gate: PolicyGate, principal: Principal, tool: TurnTool, shown: Shown) -> TurnTool:
    """`tool` itself unless it is a meta-tool; else the meta-tool deciding each inner tool for `principal`."""
    inner = tool.invoke
    if tool.source != "meta":
        return tool
    if tool.name == "mcp_list_tools":

        async def listing(arguments: Mapping[str, Any]) -> ToolOutcome:
            outcome = await inner(arguments)
            result = outcome.result
            if outcome.is_error or not isinstance(result, dict) or not isinstance(result.get("tools"), list):
                return outcome
            connection = str(result.get("connection", ""))
            entries = [e for e in result["tools"] if isinstance(e, dict)]
            targets = [named_tool_target(str(e.get("name", "")), connection, _annotations(e)) for e in entries]
            kept = [e for e, ok in zip(entries, shown(gate, principal, targets), strict=True) if ok]
            return replace(outcome, result={**result, "tools": kept})

        return replace(tool, invoke=listing)

    async def calling(arguments: Mapping[str, Any]) -> ToolOutcome:
        connection, name = arguments.get("connection"), arguments.get("tool")
        if isinstance(connection, str) and isinstance(name, str):
            decision = gate.decide(principal, "tools/call", named_tool_target(name, connection, None))
            if not decision.allowed:
                if gate.on_denied_call is not None:  # the audit trail records it as any refused call
                    gate.on_denied_call(
                        principal, Refusal("tools/call", name[:200], connection, decision.policies), None
                    )
                raise ToolInputError("mcp_call_tool", f"tool {name!r} is not allowed on connection {connection!r}")
        return await inner(arguments)

    return replace(tool, invoke=calling)


def _annotations(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = entry.get("annotations")
    return found if isinstance(found, dict) else None
