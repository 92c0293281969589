"""A `/v1/mcp/tools` peer's side of elicitation and sampling: what it can answer, and how it answers.

Per protocol pairing (peer, upstream), what the gateway forwards (docs/http-api.md):

- 2026-07-28 peer: it declares `elicitation` / `sampling` in each request's `_meta`
  (`io.modelcontextprotocol/clientCapabilities`), and the upstream is told exactly that
  (`connections/client/_input_requests.py`). Its call runs held (`gateway/mcp/peers/held.py`):
  - a 2026-07-28 upstream's `InputRequiredResult` comes back to the peer as it is, with its
    `requestState` sealed (`gateway/state/request_state.py`: bound to the principal, the tool and its
    connection, expiring, good for one retry); the retry's `inputResponses` and the upstream's
    own state go to the upstream;
  - a handshake upstream's mid-call question holds the call open and becomes an
    `InputRequiredResult` naming it, whose sealed state names the held call; the retry's answer
    goes to the waiting upstream request.
- handshake peer: it declared the features at `initialize`, sealed in its `Mcp-Session-Id`
  (`gateway/mcp/peers/sessions.py`). Its answer streams (SSE), and every question (a handshake upstream's
  mid-call request, or a 2026-07-28 upstream's `InputRequiredResult`, driven by the pool) is asked
  of it on that stream (`gateway/mcp/peers/asks.py`).

A request without those capabilities, `inputResponses` or `requestState` takes the plain path
(no context): the hot path pays a few dict lookups here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from connections import ToolOutcome
from connections.serving import CallContext, InputHandler, calling

from ...runtime import Runtime
from ...state.request_state import RequestStates, SealedState
from .asks import PeerAsks
from .held import HeldCall, HeldCalls

__all__ = ["INPUT_FEATURES", "PeerCall", "declared_input", "peer_call"]

INPUT_FEATURES = ("elicitation", "sampling")
_INPUT_REQUIRED = "input_required"


def declared_input(params: Mapping[str, Any]) -> dict[str, Any]:
    """The `elicitation` / `sampling` capability objects a 2026-07-28 request's `_meta` declares ({} otherwise)."""
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or PROTOCOL_VERSION_META_KEY not in meta:
        return {}
    capabilities = meta.get(CLIENT_CAPABILITIES_META_KEY)
    if not isinstance(capabilities, Mapping):
        return {}
    return {k: v for k in INPUT_FEATURES if isinstance(v := capabilities.get(k), Mapping)}


@dataclass(slots=True)
class PeerCall:
    """One peer's `tools/call` that can answer input requests, or retries with answers."""

    context: CallContext
    principal: str
    tool: str
    connection: str | None
    sealer: RequestStates
    held_calls: HeldCalls | None = None
    """A 2026-07-28 peer's: its call runs held (None: a handshake peer, asked on its SSE answer)."""
    held: HeldCall | None = None
    """The held call a retry continues; after `run`, the one still held for the next retry."""
    asks: PeerAsks | None = None
    """A handshake peer's: where its questions wait, dropped when the call ends."""

    async def run(self, call: Callable[[], Awaitable[ToolOutcome]]) -> dict[str, Any]:
        """The call's result as JSON, run as this peer can be asked (module docstring). Raises what the call raises."""
        held_calls = self.held_calls
        if held_calls is None:
            return await self._asked_on_its_stream(call)

        async def result() -> dict[str, Any]:
            return (await call()).mcp_result()

        held = self.held or held_calls.start(self.principal, self.tool, self.context, result)
        answer = await held_calls.next(held)
        self.held = held if held.id in held_calls else None
        return answer

    async def _asked_on_its_stream(self, call: Callable[[], Awaitable[ToolOutcome]]) -> dict[str, Any]:
        """A handshake peer's call: its questions go on its answer stream, and end with the call."""
        try:
            with calling(self.context):
                return (await call()).mcp_result()
        finally:
            if self.asks is not None:
                self.asks.ended(self.context)  # its questions still waiting are answered by nobody now

    def finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """`result`, with an `InputRequiredResult`'s `requestState` sealed for this peer's retry."""
        if result.get("resultType") != _INPUT_REQUIRED:
            return result
        inner = result.get("requestState")
        sealed = SealedState(
            principal=self.principal,
            tool=self.tool,
            connection=self.connection,
            upstream=inner if isinstance(inner, str) and self.held is None else None,
            pending=self.held.id if self.held is not None else None,
        )
        return {**result, "requestState": self.sealer.seal(sealed)}


def _modern(params: Mapping[str, Any]) -> bool:
    meta = params.get("_meta")
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


async def peer_call(
    runtime: Runtime, principal: str, params: Mapping[str, Any], context: CallContext, session: str | None = None
) -> PeerCall | None:
    """What a peer's `tools/call` carries for input requests (module docstring), set on the call's
    `context`; None: nothing, the plain path. `session` is the request's `Mcp-Session-Id`.

    Raises `RequestStateRefused` for a `requestState` the gateway will not honour, `MCPError`
    (INVALID_PARAMS) for a retry whose held call is gone or whose answers are missing."""
    if session is not None and not _modern(params):
        return _handshake_peer(runtime, principal, params, context, session)
    declared = declared_input(params)
    state, responses = params.get("requestState"), params.get("inputResponses")
    if not declared and state is None and responses is None:
        return None
    name: str = params["name"]
    tool, _, _ = await runtime.catalog.tool(name, None)
    answers = dict(responses) if isinstance(responses, Mapping) else None
    peer = PeerCall(
        context, principal, name, tool.connection if tool is not None else None, runtime.request_states, runtime.held
    )
    context.capabilities = declared
    context.pass_input_required = True
    context.input_responses = answers
    if state is not None:
        opened = await runtime.request_states.open(state, principal, name)
        if opened.pending is not None:  # the answers are for the held call's questions, not the upstream's
            peer.held = runtime.held.find(opened.pending, principal, name)
            runtime.held.answer(peer.held, answers)
            context.input_responses = None
        context.request_state = opened.upstream
    return peer


def _handshake_peer(
    runtime: Runtime, principal: str, params: Mapping[str, Any], context: CallContext, session: str
) -> PeerCall | None:
    """A handshake-era peer whose sealed session says what it can answer (`gateway/mcp/peers/sessions.py`): its
    answer streams, and the upstream's questions (mid-call, or a 2026-07-28 upstream's
    `InputRequiredResult` driven by the pool) are asked of it on that stream (`gateway/mcp/peers/asks.py`)."""
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
    return PeerCall(context, principal, name, None, runtime.request_states, asks=runtime.asks)


def _no_notifications(_method: str, _params: dict[str, Any]) -> None:  # pragma: no cover - replaced when streamed
    return None


def _asking(asks: PeerAsks, principal: str, context: CallContext, method: str) -> InputHandler:
    async def ask(params: dict[str, Any]) -> dict[str, Any]:
        if context.asker is None:  # an answer that does not stream (the SDK's path): nowhere to ask
            raise MCPError(code=mt.INVALID_REQUEST, message=f"{method} cannot reach the caller of this tool call")
        return await asks.ask(principal, context.asker, method, params, call=context)

    return ask
