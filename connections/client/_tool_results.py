"""`call_upstream_tool`: one `tools/call` on an open client, its result kept as JSON (and as its bytes).

Every pooled `tools/call` (identity clients' too) goes through here, whatever the wire (`client/_wire.py`:
stdio, the SDK's Streamable HTTP transport, the fast wire of `client/_fast_calls.py`) and whatever the
protocol generation. It does what `ClientSession.call_tool` does, minus the model: the session's own
stamp builds the request (the `_meta` envelope, `MCP-Protocol-Version`, and at 2026-07-28 `Mcp-Method`,
`Mcp-Name` and the `Mcp-Param-*` headers from the tool's listed input schema), the wire sends it, and
the answer is checked once, against the negotiated version's schema: a plain result's verdict is known
without running the schema (`plain_call_result`), any other is validated and dumped in that schema's
shape. A tool whose listing declares an output schema still has its structured content checked by the
SDK's compiled validator (`ClientSession.validate_tool_result`). The result stays JSON from here to a
forwarding peer, with its bytes where nothing changed (`UpstreamResult`); `host.mcp` makes it a
`CallToolResult` at its own boundary.
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
from ._output_shapes import simple_check
from ._passthrough import UpstreamResult, plain_call_result
from ._wire import Wire, WireAnswer, stamp

__all__ = ["LONG_TEXT", "as_call_tool_result", "call_upstream_tool", "holds_long_text"]

LONG_TEXT = 64 * 1024
"""Characters from which a string in a result's content counts as long (`holds_long_text`)."""

_COMPLETE = "complete"
_UNLISTED: Any = object()


async def call_upstream_tool(
    client: Client, wire: Wire, tool: str, arguments: Mapping[str, Any], log_cap: LoggingLevel | None = None
) -> UpstreamResult:
    """`tools/call` of `tool` with `arguments` on `wire` (`client/_wire.py`); the result as the upstream's
    negotiated version shapes it, with its bytes where nothing had to change (`client/_passthrough.py`).

    With a `CallContext` set (`calling`), the upstream reports progress and log messages on the
    call to it (`connections/client/_call_routing.py`); `log_cap` is the connection's `min_log_level`.

    An `isError` result is returned, not raised. Raises what the wire raises (`MCPError` for a JSON-RPC
    error, transport errors), `pydantic.ValidationError` for a result that does not match the version's
    schema, and `RuntimeError` for structured content that breaks the tool's output schema or a result
    that is not complete. An upstream's `InputRequiredResult` is driven with the caller's handlers, or
    returned to a caller that retries itself (`client/_input_requests.py`).
    """
    session = client.session
    version = client.protocol_version
    context = current_call()
    if context is None:  # the hot path: no frame of `_send_call`'s
        params, opts = stamp(session, "tools/call", {"name": tool, "arguments": dict(arguments)})
        meta = params.get("_meta")
        if meta is not None and CLIENT_CAPABILITIES_META_KEY in meta:  # 2026-07-28: declare no input features
            meta[CLIENT_CAPABILITIES_META_KEY] = without_input(meta[CLIENT_CAPABILITIES_META_KEY])
        answer = await wire.answer("tools/call", params, opts)
    else:
        answer = await _send_call(
            client, wire, tool, arguments, context, log_cap, context.input_responses, context.request_state
        )
        if answer.result.get("resultType") == INPUT_REQUIRED and not context.pass_input_required:

            async def retry(responses: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
                return (await _send_call(client, wire, tool, arguments, context, log_cap, responses, state)).result

            answer = WireAnswer(await drive(answer.result, context, retry))
    raw, text = answer.result, answer.text
    if plain_call_result(raw, version):  # the schema's verdict is known: accepted, dumped as it is
        result = raw
    else:
        result = _methods.serialize_server_result("tools/call", version, raw)
        if text is not None and result != raw:
            text = None  # the check changed it: those bytes are not what a peer may get
    del answer, raw
    if result.get("resultType") == INPUT_REQUIRED and context is not None and context.pass_input_required:
        return UpstreamResult(result, version, text)  # a 2026-07-28 peer answers and retries itself
    if result.get("resultType", _COMPLETE) != _COMPLETE:
        raise RuntimeError(
            f"tools/call {tool!r} answered {str(result.get('resultType'))[:40]!r}, not a complete result"
        )
    if not result.get("isError"):
        await _check_output(session, tool, result)
    return UpstreamResult(result, version, text)


async def _check_output(session: Any, tool: str, result: dict[str, Any]) -> None:
    """The tool's structured content against its listed output schema, with the SDK's compiled validator."""
    schemas = session._tool_output_schemas
    schema = schemas.get(tool, _UNLISTED)
    if schema is None:
        return  # listed without an output schema: nothing to check
    structured = result.get("structuredContent")
    if structured is not None and (check := simple_check(schema)) is not None and check(structured):
        return  # an object of plain typed members, and this content fits it (_output_shapes.py)
    validator = session._tool_output_validators.get(tool)
    if validator is None and schema is not _UNLISTED:  # compiled once per listed schema, by the SDK
        validator = session._output_schema_validator(tool, schema)
    if validator is None or structured is None or not validator.is_valid(structured):
        # Never listed, or the content fails its schema: the SDK's own check lists first and
        # raises its own sentence (valid content costs only the cached validator's `is_valid`).
        await session.validate_tool_result(tool, as_call_tool_result(result))


async def _send_call(
    client: Client,
    wire: Wire,
    tool: str,
    arguments: Mapping[str, Any],
    context: CallContext,
    log_cap: LoggingLevel | None,
    responses: dict[str, Any] | None = None,
    state: str | None = None,
) -> WireAnswer:
    """One `tools/call` request, stamped by the session; at 2026-07-28 with the caller's capabilities
    (`advertised`) and a retry's `inputResponses` / `requestState`."""
    session = client.session
    params: dict[str, Any] = {"name": tool, "arguments": dict(arguments)}
    if responses is not None:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    params, opts = stamp(session, "tools/call", params)
    meta = params.get("_meta")
    if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:  # 2026-07-28: per request
        meta[CLIENT_CAPABILITIES_META_KEY] = advertised(context, meta[CLIENT_CAPABILITIES_META_KEY])
    logs = await prepare_call(client, context, params, opts, log_cap)
    try:
        with in_flight(session, context):
            return await wire.answer("tools/call", params, opts)
    finally:
        if logs is not None:
            logs.calls.pop(context, None)


def as_call_tool_result(result: Mapping[str, Any]) -> mt.CallToolResult:
    """`result` (as `call_upstream_tool` returns it) as the SDK's `CallToolResult`, for code that wants the model."""
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
