"""Tool outcomes from what a tool returned: an upstream's `tools/call` result (JSON), or an authored tool's value.

Neither is shaped for MCP here: `ToolOutcome.mcp_result` does that for the surfaces that answer MCP.
"""

from __future__ import annotations

from typing import Any

from ..client._passthrough import UpstreamResult
from ._toolset import ToolOutcome

__all__ = ["authored_outcome", "outcome_from_mcp"]


_RESERVED_META = "io.modelcontextprotocol/"
"""Spec-reserved `_meta` keys (MCP 2026-07-28 basic §_meta) describe the upstream's own envelope
(its `serverInfo` stamp): a forwarding server does not pass them off as its own, on any surface
(`/v1/mcp/tools`, `/v1/mcp`'s `call_tool`, `POST /v1/tools/{name}`, a turn)."""


def outcome_from_mcp(answer: dict[str, Any] | UpstreamResult) -> ToolOutcome:
    """A passthrough outcome: the upstream's `CallToolResult` as JSON (`call_upstream_tool`), kept as it came
    but for the spec-reserved keys of its `_meta`; from a pooled session also with its bytes (`upstream`)."""
    upstream, result = (answer, answer.result) if isinstance(answer, UpstreamResult) else (None, answer)
    meta = result.get("_meta")
    if isinstance(meta, dict) and any(str(key).startswith(_RESERVED_META) for key in meta):
        kept = {k: v for k, v in meta.items() if not str(k).startswith(_RESERVED_META)}
        result = {k: v for k, v in result.items() if k != "_meta"}
        if kept:
            result["_meta"] = kept
    return ToolOutcome(is_error=bool(result.get("isError")), result=result, passthrough=True, upstream=upstream)


def authored_outcome(value: Any) -> ToolOutcome:
    """An authored tool's (or a meta-tool's) return value as an outcome."""
    return ToolOutcome(is_error=False, result=value)
