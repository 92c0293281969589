"""A handshake-era peer on `/v1/mcp/tools`: its declared capabilities, and its answers to mid-call questions.

The endpoint is stateless, but a handshake-era peer declares `elicitation` and `sampling` once, at
`initialize`. The gateway answers every `initialize` with an `Mcp-Session-Id` that seals the principal
and those capabilities (`RequestStates.seal_session`); the peer sends it on every later request (MCP
2025-11-25 transports §Session Management), so each `tools/call` knows, statelessly and on any replica,
what its caller can answer (`gateway/mcp/peers/input.py`). A session that declares neither is sealed under another
prefix, which `open_session` refuses before decrypting: its `tools/call`s cost what they cost without one.
The same id keys the peer's GET stream and its resource subscriptions on this replica (`gateway/mcp/peers/streams.py`).

The peer's answer to a question asked on its call's SSE answer (`gateway/mcp/peers/asks.py`) is a JSON-RPC
response POSTed to the endpoint; `answered` hands it to the waiting call and answers 202.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.types import Message, Scope, Send

from ...runtime import Runtime
from ..call_stream import principal_id
from .asks import ASK_PREFIX

__all__ = ["SESSION_HEADER", "answered", "with_peer_session"]

SESSION_HEADER = b"mcp-session-id"
_INPUT_FEATURES = ("elicitation", "sampling")


def with_peer_session(runtime: Runtime, scope: Scope, message: Mapping[str, Any], send: Send) -> Send:
    """`send`, adding a sealed `Mcp-Session-Id` to the answer of an `initialize` (module docstring); `send`
    itself for anything else."""
    if message.get("method") != "initialize":
        return send
    params = message.get("params")
    capabilities = params.get("capabilities") if isinstance(params, Mapping) else None
    declared: dict[str, Any] = {}
    if isinstance(capabilities, Mapping):
        declared = {k: v for k in _INPUT_FEATURES if isinstance(v := capabilities.get(k), Mapping)}
    session = runtime.request_states.seal_session(principal_id(scope), declared)

    async def sending(event: Message) -> None:
        if event["type"] == "http.response.start" and event.get("status") == 200:
            headers = [*event.get("headers", []), (SESSION_HEADER, session.encode())]
            event = {**event, "headers": headers}
        await send(event)

    return sending


async def answered(runtime: Runtime, scope: Scope, message: Mapping[str, Any], send: Send) -> bool:
    """Whether `message` was a peer's answer to one of the gateway's questions; if so it went to the
    waiting call and the POST got its 202 (MCP 2025-11-25: a response POSTed by the client is accepted)."""
    ident = message.get("id")
    if "method" in message or not isinstance(ident, str) or not ident.startswith(ASK_PREFIX):
        return False
    if not runtime.asks.answer(principal_id(scope), message):
        return False  # unknown, late, or another principal's: the SDK accepts and drops it, as for any stray response
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    return True
