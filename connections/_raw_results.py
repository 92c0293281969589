"""`RawToolResult`: a passthrough `tools/call` result kept as JSON, for surfaces that forward it.

An MCP surface that forwards an upstream's answer (the gateway's `/v1/mcp/tools`) needs the
result as JSON shaped for its own peer's protocol version. Going through `mcp.types` models for
that (validate the upstream's dict into a model, dump it, build another model, dump it, validate
it for the peer's version) costs more CPU than the rest of the hop. A `RawToolResult` is the
upstream's answer validated once, against the schema of the version the upstream session
negotiated, and dumped in that schema's shape; `for_version` gives what an MCP server answers at
a peer's version, with no second pass when the two versions are the same.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import mcp.types as mt
from mcp_types import methods as _methods
from pydantic import BaseModel

__all__ = ["LONG_TEXT", "RawToolResult", "holds_long_text"]

LONG_TEXT = 64 * 1024
"""Characters from which a string in a result's content counts as long (`holds_long_text`)."""


@dataclass(frozen=True, slots=True)
class RawToolResult:
    """A `tools/call` result as JSON. `is_error` results are returned, not raised."""

    result: dict[str, Any]
    """The result, validated and dumped (by alias, `None`s left out)."""
    version: str | None = None
    """The protocol version whose schema shaped `result`; None when it was dumped from the SDK's
    version-free `CallToolResult` instead."""

    @classmethod
    def from_model(cls, result: mt.CallToolResult) -> RawToolResult:
        return cls(result.model_dump(by_alias=True, mode="json", exclude_none=True))

    @property
    def is_error(self) -> bool:
        return bool(self.result.get("isError"))

    def for_version(self, version: str) -> dict[str, Any]:
        """`content`, `isError` and `structuredContent` (when present) as a server answers them at `version`.

        The same fields a passthrough `ToolOutcome` carries; anything else the upstream sent
        (its `_meta`) stays behind. Raises `pydantic.ValidationError` if they do not fit `version`'s
        schema (a result from a later revision than the peer speaks).
        """
        fields: dict[str, Any] = {"content": self.result.get("content", []), "isError": self.is_error}
        structured = self.result.get("structuredContent")
        if structured is not None:
            fields["structuredContent"] = structured
        if version == self.version:  # already validated and dumped by this schema: only its key order is missing
            return {key: fields[key] for key in _result_keys(version) if key in fields}
        return _methods.serialize_server_result("tools/call", version, fields)


@functools.cache
def _result_keys(version: str) -> tuple[str, ...]:
    """The wire keys of `version`'s `CallToolResult`, in the order its schema dumps them."""
    model = _methods.SERVER_RESULTS[("tools/call", version)]
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return tuple(field.alias or name for name, field in model.model_fields.items())


def holds_long_text(result: object) -> bool:
    """Whether `result` (a `tools/call` result as JSON) has a content item holding a string of at least
    `LONG_TEXT` characters: the large results whose copies are worth avoiding. Cheap: nothing is serialized."""
    content = result.get("content") if isinstance(result, dict) else None  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(content, list):
        return False
    for part in content:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(part, dict):
            for value in part.values():  # pyright: ignore[reportUnknownVariableType]
                if isinstance(value, str) and len(value) >= LONG_TEXT:
                    return True
    return False
