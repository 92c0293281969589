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
- handshake peer: it declared the features at `initialize` (on HTTP sealed in its `Mcp-Session-Id`,
  `gateway/mcp/peers/sessions.py`; on `serve --stdio` in the SDK's session). Its answer is a stream
  (SSE, or the stdio session), and every question (a handshake upstream's mid-call request, or a
  2026-07-28 upstream's `InputRequiredResult`, driven by the pool) is asked of it on that stream
  through the call's channel (`CallChannel.ask`; on HTTP `gateway/mcp/peers/asks.py` waits for the POSTed answer).

A request without those capabilities, `inputResponses` or `requestState` takes the plain path
(no context): the hot path pays a few dict lookups here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY, INTERNAL_ERROR, PROTOCOL_VERSION_META_KEY

from connections import ToolOutcome, TurnTool
from connections.serving import CallChannel, CallContext, CallRequest, InputHandler

from ...errors import StateUnavailable
from ...state.request_state import RequestStates, SealedState
from ..sign_in import SIGN_IN_KEY
from .held import HeldCall, HeldCalls

__all__ = ["INPUT_FEATURES", "InputServices", "PeerCall", "declared_input", "peer_input"]

INPUT_FEATURES = ("elicitation", "sampling")
_INPUT_REQUIRED = "input_required"


class InputServices(Protocol):
    """What a peer's input requests need from the app: the `requestState` sealer and the held calls."""

    @property
    def request_states(self) -> RequestStates: ...

    @property
    def held(self) -> HeldCalls: ...


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
    """A 2026-07-28 peer's `tools/call` that can answer input requests, or retries with answers: it runs held."""

    context: CallContext
    principal: str
    tool: str
    connection: str | None
    sealer: RequestStates
    held_calls: HeldCalls
    held: HeldCall | None = None
    """The held call a retry continues; after `run`, the one still held for the next retry."""

    async def run(self, call: Callable[[], Awaitable[ToolOutcome]]) -> dict[str, Any]:
        """The call's result as JSON, run held (module docstring). Raises what the call raises."""

        async def result() -> dict[str, Any]:
            return (await call()).mcp_result()

        held_calls = self.held_calls
        held = self.held or held_calls.start(self.principal, self.tool, self.context, result)
        answer = await held_calls.next(held)
        self.held = held if held.id in held_calls else None
        return answer

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


async def peer_input(
    services: InputServices,
    principal: str,
    tool: TurnTool,
    params: Mapping[str, Any],
    request: CallRequest,
    channel: CallChannel,
    *,
    modern: bool,
) -> tuple[CallContext | None, PeerCall | None]:
    """The context a peer's `tools/call` runs with (None: nothing but the result, the plain path), and, for a
    2026-07-28 peer that can answer input requests or retries, its held call (module docstring).
    `request.capabilities` are what a handshake peer declared at `initialize`.

    Raises `RequestStateRefused` for a `requestState` the gateway will not honour, `MCPError`
    (INVALID_PARAMS) for a retry whose held call is gone or whose answers are missing, (INTERNAL_ERROR,
    `data.error` `state_unavailable`) when the state cannot be claimed because Redis is away."""
    if not modern:
        declared = request.capabilities or {}
        if not declared:
            return _plain(request, channel), None
        return CallContext(
            request,
            channel,
            elicitation=_asking(channel, "elicitation/create") if "elicitation" in declared else None,
            sampling=_asking(channel, "sampling/createMessage") if "sampling" in declared else None,
        ), None
    declared = declared_input(params)
    state, responses = params.get("requestState"), params.get("inputResponses")
    if not declared and state is None and responses is None:
        return _plain(request, channel), None
    name = tool.name
    answers = dict(responses) if isinstance(responses, Mapping) else None
    if answers is not None:
        answers.pop(SIGN_IN_KEY, None)  # the gateway's own sign-in question (sign_in.py): not the upstream's
        answers = answers or None
    held: HeldCall | None = None
    upstream_state: str | None = None
    if state is not None:
        try:
            opened = await services.request_states.open(state, principal, name)
        except StateUnavailable as exc:  # Redis is away: a JSON-RPC error with the store's sentence, not code 0
            raise MCPError(INTERNAL_ERROR, exc.message, data={"error": exc.code}) from None
        if opened.pending is not None:  # the answers are for the held call's questions, not the upstream's
            held = services.held.find(opened.pending, principal, name)
            services.held.answer(held, answers)
            answers = None
        upstream_state = opened.upstream
    asked = replace(
        request, capabilities=declared, pass_input_required=True, input_responses=answers, request_state=upstream_state
    )
    context = CallContext(asked, channel)
    return context, PeerCall(context, principal, name, tool.connection, services.request_states, services.held, held)


def _plain(request: CallRequest, channel: CallChannel) -> CallContext | None:
    if request.progress_token is None and request.log_level is None:
        return None  # the hot path: no context at all
    return CallContext(request, channel)


def _asking(channel: CallChannel, method: str) -> InputHandler:
    async def ask(params: dict[str, Any]) -> dict[str, Any]:
        return await channel.ask(method, params)

    return ask
