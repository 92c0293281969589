"""Tool outcomes from what a tool returned: an upstream's `CallToolResult`, or an authored tool's value."""

from __future__ import annotations

import json
from typing import Any

import mcp.types as mt

from ._toolset import ToolOutcome

__all__ = ["authored_outcome", "outcome_from_mcp"]


def outcome_from_mcp(result: mt.CallToolResult) -> ToolOutcome:
    """A passthrough outcome: the upstream's content and structured content as they came."""
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return ToolOutcome(
        is_error=bool(result.is_error),
        result=dumped,
        content=dumped.get("content", []),
        structured=dumped.get("structuredContent"),
        upstream=result,
    )


def authored_outcome(value: Any) -> ToolOutcome:
    """An authored tool's (or a meta-tool's) return value as an outcome: text, and the value when it is an object."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    structured = value if isinstance(value, dict) else None
    return ToolOutcome(
        is_error=False,
        result=value,
        content=[{"type": "text", "text": text}],
        structured=structured,  # pyright: ignore[reportArgumentType]
    )
