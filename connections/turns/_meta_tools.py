"""The attached-connection meta-tools (docs/connections.md): the model lists and calls tools of connections
that are neither advertised nor host-only through `mcp_list_tools` and `mcp_call_tool`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as mt

from .._exceptions import ToolInputError
from ..client._passthrough import UpstreamResult
from ..project._definitions import ConnectionDefinition
from ._outcomes import authored_outcome, outcome_from_mcp
from ._toolset import ToolOutcome, TurnTool

__all__ = ["CallTool", "ListTools", "meta_tools"]

ListTools = Callable[[ConnectionDefinition, Mapping[str, str] | None], Awaitable[list[mt.Tool]]]
CallTool = Callable[
    [ConnectionDefinition, str, Mapping[str, Any], Mapping[str, str] | None], Awaitable[dict[str, Any] | UpstreamResult]
]
"""Reaches the upstream: the `tools/call` result as JSON (`call_upstream_tool`), from a pooled session with its
bytes (`UpstreamResult`)."""


def meta_tools(
    attached: Mapping[str, ConnectionDefinition],
    session_headers: Mapping[str, Mapping[str, str]],
    list_tools: ListTools,
    call_tool: CallTool,
) -> dict[str, TurnTool]:
    """`mcp_list_tools` and `mcp_call_tool` over the `attached` connections, with this session's headers."""
    names = sorted(attached)

    def pick(arguments: Mapping[str, Any], meta_tool: str) -> ConnectionDefinition:
        name = arguments.get("connection")
        if not isinstance(name, str) or name not in attached:
            raise ToolInputError(meta_tool, f"'connection' must be one of {', '.join(names)}; got {str(name)[:64]!r}")
        return attached[name]

    async def list_invoke(arguments: Mapping[str, Any]) -> ToolOutcome:
        defn = pick(arguments, "mcp_list_tools")
        listing = await list_tools(defn, session_headers.get(defn.name))
        entries = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing if defn.allows_tool(t.name)
        ]
        return authored_outcome({"connection": defn.name, "tools": entries})

    async def call_invoke(arguments: Mapping[str, Any]) -> ToolOutcome:
        defn = pick(arguments, "mcp_call_tool")
        tool = arguments.get("tool")
        args = arguments.get("arguments", {})
        if not isinstance(tool, str) or not tool:
            raise ToolInputError("mcp_call_tool", "'tool' must be the name of one of the connection's tools")
        if not defn.allows_tool(tool):
            raise ToolInputError("mcp_call_tool", f"tool {tool!r} is not allowed on connection {defn.name!r}")
        if not isinstance(args, dict):
            raise ToolInputError("mcp_call_tool", "'arguments' must be a JSON object")
        return outcome_from_mcp(await call_tool(defn, tool, args, session_headers.get(defn.name)))

    conn_schema = {"type": "string", "enum": names, "description": "The MCP connection to use"}
    return {
        "mcp_list_tools": TurnTool(
            name="mcp_list_tools",
            description="List the tools of one attached MCP connection: " + ", ".join(names) + ".",
            input_schema={"type": "object", "properties": {"connection": conn_schema}, "required": ["connection"]},
            annotations={"readOnlyHint": True},
            effect="read",
            source="meta",
            invoke=list_invoke,
        ),
        "mcp_call_tool": TurnTool(
            name="mcp_call_tool",
            description="Call one tool on one attached MCP connection (see mcp_list_tools for its tools).",
            input_schema={
                "type": "object",
                "properties": {
                    "connection": conn_schema,
                    "tool": {"type": "string", "description": "The tool's name on that connection"},
                    "arguments": {"type": "object", "description": "The tool's input"},
                },
                "required": ["connection", "tool"],
            },
            source="meta",
            invoke=call_invoke,
        ),
    }
