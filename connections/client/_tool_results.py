"""`call_tool_json`: one `tools/call` on an open client, its result kept as JSON.

Every pooled `tools/call` (identity clients' too) goes through here, whatever the wire (stdio, the SDK's
Streamable HTTP transport, the fast wire of `connections/client/_fast_calls.py`) and whatever the protocol generation.
It does what `ClientSession.call_tool` does, minus the model: the session's own stamp builds the
request (the `_meta` envelope, `MCP-Protocol-Version`, and at 2026-07-28 `Mcp-Method`, `Mcp-Name`
and the `Mcp-Param-*` headers from the tool's listed input schema), the session's dispatcher sends
it, and the answer is validated once, against the negotiated version's schema, and dumped in that
schema's shape. A tool whose listing declares an output schema still has its structured content
checked by the SDK (`ClientSession.validate_tool_result`). The result stays a dict from here to a
forwarding peer; `host.mcp` makes it a `CallToolResult` at its own boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as mt
from mcp import Client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, LoggingLevel
from mcp_types import methods as _methods

from .._call_context import CallContext, current_call
from ._call_routing import prepare_call
from ._input_requests import INPUT_REQUIRED, advertised, drive, in_flight, without_input

__all__ = ["LONG_TEXT", "as_call_tool_result", "call_tool_json", "holds_long_text"]

LONG_TEXT = 64 * 1024
"""Characters from which a string in a result's content counts as long (`holds_long_text`)."""

_COMPLETE = "complete"
_UNLISTED: Any = object()


async def call_tool_json(
    client: Client, tool: str, arguments: Mapping[str, Any], log_cap: LoggingLevel | None = None
) -> dict[str, Any]:
    """`tools/call` of `tool` with `arguments`; the result as the upstream's negotiated version shapes it.

    With a `CallContext` set (`calling`), the upstream reports progress and log messages on the
    call to it (`connections/client/_call_routing.py`); `log_cap` is the connection's `min_log_level`.

    An `isError` result is returned, not raised. Raises what the session's dispatcher raises
    (`MCPError` for a JSON-RPC error, transport errors), `pydantic.ValidationError` for a result that
    does not match the version's schema, and `RuntimeError` for structured content that breaks the
    tool's output schema or a result that is not complete. An upstream's `InputRequiredResult` is
    driven with the caller's handlers, or returned to a caller that retries itself (`client/_input_requests.py`).
    """
    session = client.session
    context = current_call()
    if context is None:  # the hot path: no frame of `_send_call`'s
        data: dict[str, Any] = {"method": "tools/call", "params": {"name": tool, "arguments": dict(arguments)}}
        opts: dict[str, Any] = {}
        session._stamp(data, opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
        meta = data["params"].get("_meta")
        if meta is not None and CLIENT_CAPABILITIES_META_KEY in meta:  # 2026-07-28: declare no input features
            meta[CLIENT_CAPABILITIES_META_KEY] = without_input(meta[CLIENT_CAPABILITIES_META_KEY])
        raw = await session._dispatcher.send_raw_request("tools/call", data["params"], opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    else:
        raw = await _send_call(
            client, tool, arguments, context, log_cap, context.input_responses, context.request_state
        )
        if raw.get("resultType") == INPUT_REQUIRED and not context.pass_input_required:

            async def retry(responses: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
                return await _send_call(client, tool, arguments, context, log_cap, responses, state)

            raw = await drive(raw, context, retry)
    result = _methods.serialize_server_result("tools/call", client.protocol_version, raw)
    if result.get("resultType") == INPUT_REQUIRED and context is not None and context.pass_input_required:
        return result  # a 2026-07-28 peer answers and retries itself (`connections/client/_input_requests.py`)
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
            validator = session._output_schema_validator(tool, schema)  # pyright: ignore[reportPrivateUsage]
        if validator is None or structured is None or not validator.is_valid(structured):
            # Never listed, or the content fails its schema: the SDK's own check lists first and
            # raises its own sentence (valid content costs only the cached validator's `is_valid`).
            await session.validate_tool_result(tool, as_call_tool_result(result))
    return result


async def _send_call(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any],
    context: CallContext | None,
    log_cap: LoggingLevel | None,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
) -> dict[str, Any]:
    """One `tools/call` request, stamped by the session; at 2026-07-28 with the caller's capabilities
    (`advertised`) and a retry's `inputResponses` / `requestState`. The raw result."""
    session = client.session
    params: dict[str, Any] = {"name": tool, "arguments": dict(arguments)}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    data: dict[str, Any] = {"method": "tools/call", "params": params}
    opts: dict[str, Any] = {}
    session._stamp(data, opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    meta = data["params"].get("_meta")
    if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:  # 2026-07-28: per request
        meta[CLIENT_CAPABILITIES_META_KEY] = advertised(context, meta[CLIENT_CAPABILITIES_META_KEY])
    if context is None:
        return await session._dispatcher.send_raw_request("tools/call", data["params"], opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    logs = await prepare_call(client, context, data["params"], opts, log_cap)
    try:
        with in_flight(session, context):
            return await session._dispatcher.send_raw_request("tools/call", data["params"], opts)  # pyright: ignore[reportPrivateUsage, reportArgumentType]
    finally:
        if logs is not None:
            logs.calls.pop(context, None)


def as_call_tool_result(result: Mapping[str, Any]) -> mt.CallToolResult:
    """`result` (as `call_tool_json` returns it) as the SDK's `CallToolResult`, for code that wants the model."""
    return mt.CallToolResult.model_validate(result, by_name=False)


def holds_long_text(result: object) -> bool:
    """Whether `result` (a `tools/call` result as JSON) has a content item holding a string of at least
    `LONG_TEXT` characters: the large results whose copies are worth avoiding. Cheap: nothing is serialized."""
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return False
    for part in content:
        if isinstance(part, dict):
            for value in part.values():
                if isinstance(value, str) and len(value) >= LONG_TEXT:
                    return True
    return False
