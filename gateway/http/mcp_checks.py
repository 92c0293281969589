"""Checks on an MCP POST that come before its body reaches the SDK, and JSON-RPC batches.

- `Content-Type` must be `application/json` (Streamable HTTP, MCP 2025-03-26 and later); anything
  else is 415 with a JSON-RPC error, as every refusal on the MCP routes is (the SDK would answer
  in plain text).
- `MCP-Protocol-Version`, when sent, must be a version this server speaks; anything else is 400
  naming the versions it does (MCP 2025-06-18 basic/transports §Protocol Version Header), instead of
  the SDK's guess that an unknown version is a 2026 envelope.
- The body must be one well-formed JSON-RPC 2.0 message (`envelope_problem`, read by the bounded
  JSON reader), else one short JSON-RPC error in either protocol era, not a validation dump.
- A JSON-RPC batch is served only for 2025-03-26, the one revision that has batches (a request
  without the header is 2025-03-26 by the same section): each message is answered on its own by
  the SDK and the answers come back as one JSON array (JSON-RPC 2.0 §6). Later revisions removed
  batches, so there a batch is refused with a sentence saying so, and so is a message in a batch
  whose `_meta` speaks 2026-07-28 (`_modern_in_batch`): its call could be held for a retry that a
  2025-03-26 batch has no way to make.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as mt
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from oauth._shared import printable

from ._asgi import JsonRefused, header, loads_bounded, send_rpc_error

__all__ = [
    "BATCH_VERSION",
    "batch_problem",
    "content_type_refusal",
    "envelope_problem",
    "header_problem",
    "request_id",
    "serve_batch",
    "version_problem",
]

BATCH_VERSION = "2025-03-26"
_SPOKEN = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)

Problem = tuple[int, int, str]
"""(HTTP status, JSON-RPC error code, message)."""
Handle = Callable[[Scope, Receive, Send], Awaitable[None]]


def header_problem(scope: Scope) -> Problem | None:
    """A refusal for a wrong `Content-Type`, else None."""
    content_type = header(scope, b"content-type")
    if content_type is None or not content_type.lower().startswith("application/json"):
        return 415, mt.INVALID_REQUEST, content_type_refusal(content_type)
    return None


def version_problem(scope: Scope) -> tuple[str, dict[str, Any]] | None:
    """For an `MCP-Protocol-Version` this server does not speak: the sentence and the `data` of the spec's
    -32022 (`UNSUPPORTED_PROTOCOL_VERSION`: `supported`, `requested`), which a client reads to pick a version it
    shares (the `mcp` SDK's `discover` does); else None."""
    version = header(scope, b"mcp-protocol-version")
    if version is None or version in _SPOKEN:
        return None
    requested = printable(version, 40)
    message = (
        f"Unsupported protocol version {requested!r} in MCP-Protocol-Version; this server speaks "
        f"{', '.join(_SPOKEN)}: send one of them"
    )
    return message, {"supported": list(_SPOKEN), "requested": requested}


def request_id(raw: bytes) -> str | int | None:
    """The id of the one JSON-RPC request in `raw`, when it has a well-formed one; None for a batch or a bad body."""
    message = envelope_problem(raw) if not raw.lstrip().startswith(b"[") else None
    ident = message.get("id") if isinstance(message, dict) else None
    return ident if isinstance(ident, str | int) and not isinstance(ident, bool) else None


def content_type_refusal(content_type: str | None) -> str:
    """The sentence for a POST to an MCP endpoint whose `Content-Type` is not JSON (here, and the request guard's)."""
    got = f"got {printable(content_type, 60)!r}" if content_type is not None else "none was sent"
    return f"Invalid Request: Content-Type must be application/json ({got})"


def batch_problem(scope: Scope) -> Problem | None:
    """None when this request's protocol version has batches (2025-03-26, or no header), else why not."""
    version = header(scope, b"mcp-protocol-version")
    if version is None or version == BATCH_VERSION:
        return None
    return (
        400,
        mt.INVALID_REQUEST,
        f"Invalid Request: JSON-RPC batches exist only in MCP {BATCH_VERSION}; with MCP-Protocol-Version "
        f"{version} send one JSON-RPC message per POST",
    )


def envelope_problem(raw: bytes) -> tuple[int, str] | dict[str, Any]:
    """A JSON-RPC 2.0 error code and sentence when `raw` is not one well-formed message, else the message.

    Checked before the SDK so that every malformed body, in either protocol era, gets the same
    short answer (JSON-RPC 2.0 §4, §5.1) instead of a validation dump.
    """
    try:
        message = loads_bounded(raw)
    except JsonRefused as exc:
        return mt.PARSE_ERROR, f"Parse error: {exc}"
    if isinstance(message, list):
        return mt.INVALID_REQUEST, "Invalid Request: a batch inside a batch"  # a top-level batch is `serve_batch`'s
    if not isinstance(message, dict):
        return mt.INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC object"
    body: dict[str, Any] = message
    if body.get("jsonrpc") != "2.0":
        return mt.INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'
    if "id" in body:
        ident = body["id"]
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return mt.INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
    if "method" in body and not isinstance(body["method"], str):
        return mt.INVALID_REQUEST, "Invalid Request: method must be a string"
    if "method" not in body and "result" not in body and "error" not in body:
        return mt.INVALID_REQUEST, "Invalid Request: no method"
    if "params" in body and not isinstance(body["params"], dict):
        return mt.INVALID_PARAMS, "Invalid params: params must be an object"
    return body


_MODERN_IN_BATCH = (
    "Invalid Request: this message's _meta speaks MCP 2026-07-28 (io.modelcontextprotocol/protocolVersion), which "
    "has no batches: a 2026-07-28 call may need a retry with requestState, which a 2025-03-26 batch cannot make; "
    "send it as a POST of its own with MCP-Protocol-Version: 2026-07-28"
)


def _modern_in_batch(item: Any) -> bool:
    """Whether a batch's message carries the 2026-07-28 `_meta` envelope (module docstring)."""
    params = item.get("params") if isinstance(item, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


def _error(ident: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


async def serve_batch(handle: Handle, scope: Scope, raw: bytes, send: Send) -> None:
    """Answer a batch (`raw` is a JSON array): each message through `handle` (the SDK), then all
    answers as one JSON array; or refuse it (a version without batches, a body that is not JSON)."""
    refused = batch_problem(scope)
    try:
        items = loads_bounded(raw)  # the depth cap and the Unicode check hold for a batch too
    except JsonRefused as exc:
        items, refused = None, (400, mt.PARSE_ERROR, f"Parse error: {exc}")
    if refused is not None or not isinstance(items, list):
        status, rpc_code, text = refused or (400, mt.INVALID_REQUEST, "Invalid Request")
        await send_rpc_error(send, status, rpc_code, text)
        return
    answers: list[Any] = []
    if not items:  # JSON-RPC 2.0 §6: an empty array is one Invalid Request, not an empty batch answer
        await send_rpc_error(send, 400, mt.INVALID_REQUEST, "Invalid Request: an empty batch")
        return
    for item in items:
        one = json.dumps(item).encode()
        checked = envelope_problem(one)
        if isinstance(checked, tuple):
            ident = item.get("id") if isinstance(item, dict) else None
            answers.append(_error(ident if isinstance(ident, str | int) else None, *checked))
            continue
        if _modern_in_batch(item):
            answers.append(_error(item.get("id"), mt.INVALID_REQUEST, _MODERN_IN_BATCH))
            continue
        answer = await _one(handle, scope, one)
        if answer is not None:
            answers.append(answer)
    if not answers:  # only notifications and responses: nothing to answer (MCP 2025-03-26 transports)
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    await _send(send, 200, answers)


async def _send(send: Send, status: int, doc: Any) -> None:
    payload = json.dumps(doc).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def _one(handle: Handle, scope: Scope, raw: bytes) -> Any:
    """The SDK's answer to one message (None for a notification's empty 202)."""
    sent = False
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return {"type": "http.disconnect"}

    async def capture(message: Message) -> None:
        if message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await handle(dict(scope), receive, capture)
    body = b"".join(chunks)
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return _error(None, mt.INTERNAL_ERROR, "Internal error: the answer to this message was not JSON")
