"""A `/v1/mcp/tools` peer's side of elicitation and sampling: what it can answer, and its retries.

A 2026-07-28 peer declares `elicitation` / `sampling` in each request's `_meta`
(`io.modelcontextprotocol/clientCapabilities`). The call then runs with a `CallContext` that says
so (`connections/_input_requests.py` tells the upstream exactly that), and an upstream's
`InputRequiredResult` comes back to the peer with its `requestState` sealed
(`request_state.py`: bound to the principal, the tool and its connection, expiring, good for one
retry). The peer's retry carries its `inputResponses` and that state: the gateway opens it, checks
it, and forwards the answers with the upstream's own state to the same upstream call.

A request without those capabilities, `inputResponses` or `requestState` takes the plain path
(no context): the hot path pays a few dict lookups here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from connections import CallContext, InputHandler

from .peer_asks import PeerAsks
from .request_state import RequestStates, SealedState
from .runtime import Runtime

__all__ = ["INPUT_FEATURES", "PeerCall", "declared_input", "peer_call"]

INPUT_FEATURES = ("elicitation", "sampling")
_INPUT_REQUIRED = "input_required"


def declared_input(params: Mapping[str, Any]) -> dict[str, Any]:
    """The `elicitation` / `sampling` capability objects a 2026-07-28 request's `_meta` declares ({} otherwise)."""
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or PROTOCOL_VERSION_META_KEY not in meta:
        return {}
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(capabilities, Mapping):
        return {}
    return {k: v for k in INPUT_FEATURES if isinstance(v := capabilities.get(k), Mapping)}  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]


def _modern(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


def _handshake_peer(
    runtime: Runtime, principal: str, params: Mapping[str, Any], context: CallContext, session: str
) -> PeerCall | None:
    """A handshake-era peer whose sealed session says what it can answer (`peer_sessions.py`): its
    answer streams, and the upstream's questions (mid-call, or a 2026-07-28 upstream's
    `InputRequiredResult` driven by the pool) are asked of it on that stream (`peer_asks.py`)."""
    declared = runtime.request_states.open_session(session, principal)
    if not declared:
        return None
    context.capabilities = declared
    if "elicitation" in declared:
        context.elicitation = _asking(runtime.asks, principal, context, "elicitation/create")
    if "sampling" in declared:
        context.sampling = _asking(runtime.asks, principal, context, "sampling/createMessage")
    if context.sink is None:
        context.sink = _no_notifications  # an SSE answer, so that questions can ride it
    name: str = params["name"]
    return PeerCall(context, principal, name, None, runtime.request_states)


def _no_notifications(_method: str, _params: dict[str, Any]) -> None:  # pragma: no cover - replaced when streamed
    return None


def _asking(asks: PeerAsks, principal: str, context: CallContext, method: str) -> InputHandler:
    async def ask(params: dict[str, Any]) -> dict[str, Any]:
        if context.asker is None:  # an answer that does not stream (the SDK's path): nowhere to ask
            raise MCPError(code=mt.INVALID_REQUEST, message=f"{method} cannot reach the caller of this tool call")
        return await asks.ask(principal, context.asker, method, params)

    return ask


async def _not_bridged(_params: dict[str, Any]) -> dict[str, Any]:
    raise MCPError(
        code=mt.INVALID_REQUEST,
        message="the upstream asked mid-call, and this gateway cannot yet relay that to a 2026-07-28 peer",
    )


@dataclass(slots=True)
class PeerCall:
    """One peer's `tools/call` that can answer input requests, or retries with answers."""

    context: CallContext
    principal: str
    tool: str
    connection: str | None
    sealer: RequestStates

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """`result`, with an `InputRequiredResult`'s `requestState` sealed for this peer's retry."""
        if result.get("resultType") != _INPUT_REQUIRED:
            return result
        inner = result.get("requestState")
        sealed = SealedState(
            principal=self.principal,
            tool=self.tool,
            connection=self.connection,
            upstream=inner if isinstance(inner, str) else None,
        )
        return {**result, "requestState": self.sealer.seal(sealed)}


async def peer_call(
    runtime: Runtime, principal: str, params: Mapping[str, Any], context: CallContext, session: str | None = None
) -> PeerCall | None:
    """What a peer's `tools/call` carries for input requests (module docstring), set on the call's
    `context`; None: nothing, the plain path. `session` is the request's `Mcp-Session-Id`.

    Raises `RequestStateRefused` for a `requestState` the gateway will not honour."""
    if session is not None and not _modern(params):
        return _handshake_peer(runtime, principal, params, context, session)
    declared = declared_input(params)
    state, responses = params.get("requestState"), params.get("inputResponses")
    if not declared and state is None and responses is None:
        return None
    sealer = runtime.request_states
    name: str = params["name"]
    tool, _, _ = await runtime.catalog.tool(name, None)
    upstream_state: str | None = None
    if state is not None:
        opened = await sealer.open(state, principal, name)
        upstream_state = opened.upstream
    context.capabilities = declared
    context.pass_input_required = True
    context.elicitation = _not_bridged if "elicitation" in declared else None
    context.sampling = _not_bridged if "sampling" in declared else None
    context.input_responses = dict(responses) if isinstance(responses, Mapping) else None  # pyright: ignore[reportUnknownArgumentType]
    context.request_state = upstream_state
    return PeerCall(context, principal, name, tool.connection if tool is not None else None, sealer)
