"""Tool outcomes from what a tool returned: an upstream's `tools/call` result (JSON), or an authored tool's value.

Neither is shaped for MCP here: `ToolOutcome.mcp_result` does that for the surfaces that answer MCP.
"""

from __future__ import annotations

from typing import Any

from ._toolset import ToolOutcome

__all__ = ["authored_outcome", "outcome_from_mcp"]


def outcome_from_mcp(result: dict[str, Any]) -> ToolOutcome:
    """A passthrough outcome: the upstream's `CallToolResult` as JSON (`call_tool_json`), kept as it came."""
    return ToolOutcome(is_error=bool(result.get("isError")), result=result, passthrough=True)


def authored_outcome(value: Any) -> ToolOutcome:
    """An authored tool's (or a meta-tool's) return value as an outcome."""
    return ToolOutcome(is_error=False, result=value)
