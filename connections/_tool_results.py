"""`call_tool_json`: one `tools/call` on an open client, its result kept as JSON.

Every pooled and one-off `tools/call` goes through here, whatever the wire (stdio, the SDK's
Streamable HTTP transport, the fast wire of `_fast_calls.py`) and whatever the protocol generation.
It does what `ClientSession.call_tool` does, minus the model: the session's own stamp builds the
request (the `_meta` envelope, `MCP-Protocol-Version`, and at 2026-07-28 `Mcp-Method`, `Mcp-Name`
and the `Mcp-Param-*` headers from the tool's listed input schema), the session's dispatcher sends
it, and the answer is validated once, against the negotiated version's schema, and dumped in that
schema's shape. A tool whose listing declares an output schema still has its structured content
checked by the SDK (`ClientSession.validate_tool_result`). The result stays a dict from here to a
forwarding peer; `host.mcp` makes it a `CallToolResult` at its own boundary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

import mcp.types as mt
from mcp import Client
from mcp_types import methods as _methods

__all__ = ["LONG_TEXT", "as_call_tool_result", "call_tool_json", "holds_long_text", "send_request"]

LONG_TEXT = 64 * 1024
"""Characters from which a string in a result's content counts as long (`holds_long_text`)."""

_COMPLETE = "complete"
_UNLISTED: Any = object()


def send_request(client: Client, method: str, params: dict[str, Any]) -> Awaitable[Any]:
    """`method` with `params` on the client's session, stamped by the session (the `_meta` envelope and the
    version's headers) and sent by its dispatcher: the answer's `result` as the wire has it, unvalidated."""
    session = client.session
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    return session._dispatcher.send_raw_request(method, data["params"], opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]


async def call_tool_json(client: Client, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`tools/call` of `tool` with `arguments`; the result as the upstream's negotiated version shapes it.

    An `isError` result is returned, not raised. Raises what the session's dispatcher raises
    (`MCPError` for a JSON-RPC error, transport errors), `pydantic.ValidationError` for a result that
    does not match the version's schema, and `RuntimeError` for structured content that breaks the
    tool's output schema or a result that is not complete (an interim `input_required`).
    """
    session = client.session
    raw = await send_request(client, "tools/call", {"name": tool, "arguments": dict(arguments)})
    result = _methods.serialize_server_result("tools/call", client.protocol_version, raw)
    if result.get("resultType", _COMPLETE) != _COMPLETE:
        raise RuntimeError(
            f"tools/call {tool!r} answered {str(result.get('resultType'))[:40]!r}, not a complete result"
        )
    if not result.get("isError"):
        schemas = session._tool_output_schemas  # pyright: ignore[reportPrivateUsage]
        schema = schemas.get(tool, _UNLISTED)
        if schema is None:
            return result  # listed without an output schema: nothing to check
        structured = result.get("structuredContent")
        validator = session._tool_output_validators.get(tool)  # pyright: ignore[reportPrivateUsage]
        if validator is None and schema is not _UNLISTED:  # compiled once per listed schema, by the SDK
            validator = session._output_schema_validator(tool, schema)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
        if validator is None or structured is None or not validator.is_valid(structured):
            # Never listed, or the content fails its schema: the SDK's own check lists first and
            # raises its own sentence (valid content costs only the cached validator's `is_valid`).
            await session.validate_tool_result(tool, as_call_tool_result(result))
    return result


def as_call_tool_result(result: Mapping[str, Any]) -> mt.CallToolResult:
    """`result` (as `call_tool_json` returns it) as the SDK's `CallToolResult`, for code that wants the model."""
    return mt.CallToolResult.model_validate(result, by_name=False)


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
