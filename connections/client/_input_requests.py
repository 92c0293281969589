"""Elicitation and sampling on a pooled call: which caller answers an upstream's input request, and how.

An upstream asks for input in one of two shapes, by protocol generation:

- handshake era (MCP 2025-11-25 client/elicitation, client/sampling): `elicitation/create` or
  `sampling/createMessage` arrives mid-call. A pooled session is shared by callers and declares its
  capabilities once, so the pool's client declares both (`client_callbacks`), and each request is
  answered by the handler of the call it belongs to: `current_call()`, under which the SDK runs the
  callback. The SDK's Streamable HTTP transport reads a POST's answer stream in the context of the
  task that sent the POST, and the fast wire (`connections/client/_fast_answers.py`) answers on the caller's own task,
  so a request met on a call's answer stream finds that call and no other. Stdio and SSE read every
  message on a task of their own, and the wire does not say which call a request is about: such a
  request goes to the one call in flight on the session when it is the only request in flight there
  (`in_flight`), as `connections/client/_call_routing.py` does for log messages. A request that finds no call, or a
  call whose caller has no handler for it, is refused with INVALID_REQUEST, the error a client that
  does not support the feature gives (the SDK's default callbacks): never another caller's handler.
  Routing by elimination (skipping a call whose question already waits) would be unsound: one call
  may ask two questions at once, and the second would reach another caller. So while a question
  waits for its caller (a 2026-07-28 peer's held call waiting for its retry, a person filling in a
  form), every other caller's question on that session is refused; once one is, each waiting
  question there gets at most the connection's `timeouts.question` seconds more (`_yielding`), after
  which it fails upstream with a sentence and the session can route again. One caller's unanswered
  question thus blocks another's for a bounded time, and a caller alone on the session is never cut.
- 2026-07-28 (SEP-2322, multi round-trip requests): the upstream answers `tools/call` with an
  `InputRequiredResult`. Each request's `_meta` declares exactly what its caller can answer
  (`advertised`). `drive` answers the embedded requests with the caller's handlers and retries with
  `inputResponses` and the echoed `requestState`, at most `MAX_ROUNDS` times, unless the caller
  takes the result itself (`CallContext.pass_input_required`: a 2026-07-28 peer retries on its own).

Every wait is the caller's handler's: the pool's `call` timeout bounds the whole call, rounds included.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
import mcp_types as mt
from mcp.client.session import ClientRequestContext, ClientResponse
from mcp.shared.exceptions import MCPError

from .._call_context import CallContext, InputHandler, current_call

__all__ = [
    "INPUT_REQUIRED",
    "MAX_ROUNDS",
    "advertised",
    "answer",
    "client_callbacks",
    "drive",
    "in_flight",
    "without_input",
]

INPUT_REQUIRED = "input_required"
MAX_ROUNDS = 10
"""Rounds of `InputRequiredResult` a call may take before it fails (the SDK clients' default)."""

_FEATURES = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling"}
_DEFAULT_CAPABILITY: dict[str, dict[str, Any]] = {"elicitation": {"form": {}}, "sampling": {}}
"""What a caller with a handler but no declared capability object answers (host code)."""


def _handler(context: CallContext | None, feature: str) -> InputHandler | None:
    if context is None:
        return None
    handler: InputHandler | None = context.elicitation if feature == "elicitation" else context.sampling
    return handler


_WITHOUT: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}


def without_input(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """`advertised(None, capabilities)`, computed once per session: its stamp passes the same dict every time."""
    found = _WITHOUT.get(id(capabilities))
    if found is not None and found[0] is capabilities:
        return found[1]
    if len(_WITHOUT) >= 256:
        _WITHOUT.clear()
    stripped = advertised(None, capabilities)
    _WITHOUT[id(capabilities)] = (capabilities, stripped)  # the key's object kept alive: its id stays its own
    return stripped


def advertised(context: CallContext | None, capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """`capabilities` (the pool client's own) with `elicitation` and `sampling` as the caller can answer them."""
    declared = (context.capabilities if context is not None else None) or {}
    out = {k: v for k, v in capabilities.items() if k not in _DEFAULT_CAPABILITY}
    for feature, default in _DEFAULT_CAPABILITY.items():
        if _handler(context, feature) is not None:
            out[feature] = declared.get(feature, default)
    return out


async def answer(context: CallContext | None, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The caller's answer to one upstream input request, as JSON. Raises `MCPError` (INVALID_REQUEST)
    when the caller cannot answer it, or whatever refusal its handler raises."""
    feature = _FEATURES.get(method)
    handler = _handler(context, feature) if feature is not None else None
    if handler is None:
        what = feature.capitalize() if feature is not None else f"{method[:64]!r}"
        raise MCPError(
            code=mt.INVALID_REQUEST,
            message=f"{what} not supported: the caller of this tool call cannot answer it",
        )
    return await handler(dict(params))


Retry = Callable[[dict[str, Any] | None, str | None], Awaitable[dict[str, Any]]]
"""Sends the original request again with `inputResponses` and `requestState`; its raw result."""


async def drive(first: dict[str, Any], context: CallContext | None, retry: Retry) -> dict[str, Any]:
    """Resolve `first` (an `InputRequiredResult` as JSON) to the upstream's final result with the caller's
    handlers (module docstring). Raises `MCPError` for a refused request or too many rounds."""
    result = first
    for _ in range(MAX_ROUNDS):
        if result.get("resultType") != INPUT_REQUIRED:
            return result
        requests: Mapping[str, Any] = result.get("inputRequests") or {}
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            responses[key] = await answer(context, str(request.get("method")), request.get("params") or {})
        state = result.get("requestState")
        result = await retry(responses or None, state if isinstance(state, str) else None)
    if result.get("resultType") != INPUT_REQUIRED:
        return result
    raise MCPError(
        code=mt.INTERNAL_ERROR, message=f"the upstream asked for input more than {MAX_ROUNDS} times in one call"
    )


_IN_FLIGHT: weakref.WeakKeyDictionary[Any, dict[CallContext, None]] = weakref.WeakKeyDictionary()


@contextmanager
def in_flight(session: Any, context: CallContext | None) -> Generator[None]:
    """Mark `context`'s call as in flight on `session` (a `ClientSession`) for the block."""
    if context is None or (context.elicitation is None and context.sampling is None):
        yield
        return
    calls = _IN_FLIGHT.setdefault(session, {})
    calls[context] = None
    try:
        yield
    finally:
        calls.pop(context, None)


def _only_call(session: Any) -> CallContext | None:
    """The call an upstream request on `session` belongs to when the wire does not say (module docstring), or None."""
    calls = _IN_FLIGHT.get(session)
    pending = getattr(getattr(session, "_dispatcher", None), "_pending", None)
    if not calls or len(calls) != 1 or not isinstance(pending, dict) or len(pending) != 1:
        return None  # none, or several requests in flight: the request may be about another caller's
    return next(iter(calls))


_WAITING: weakref.WeakKeyDictionary[Any, set[anyio.CancelScope]] = weakref.WeakKeyDictionary()
"""Per session, the questions routed by `_only_call` that wait for their caller's answer (`_yielding`)."""


async def _yielding(session: Any, owner: CallContext, method: str, params: dict[str, Any], limit: float) -> Any:
    """`answer(owner, ...)` for a question routed by `_only_call`, cut `limit` seconds after another caller's
    question on `session` had to be refused (module docstring)."""
    waiting = _WAITING.setdefault(session, set())
    with anyio.CancelScope() as scope:
        waiting.add(scope)
        try:
            return await answer(owner, method, params)
        finally:
            waiting.discard(scope)
    raise MCPError(
        code=mt.INTERNAL_ERROR,
        message=f"the caller did not answer the {method} request within {limit:g}s of another caller's question "
        "on this connection being refused: its wire does not say which call a question is about, so no other "
        "caller's question can be routed while one waits (timeouts.question)",
    )


def _refused_for_want_of_a_route(session: Any, limit: float) -> None:
    """Another caller's question could not be routed: every question waiting on `session` gets `limit` s more."""
    deadline = anyio.current_time() + limit
    for scope in _WAITING.get(session, ()):
        scope.deadline = min(scope.deadline, deadline)


async def _callback(session: Any, method: str, params: Any, limit: float) -> Any:
    dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        owner = current_call()  # the request came on its call's own answer stream
        if owner is not None:
            result = await answer(owner, method, dumped)
        elif (owner := _only_call(session)) is not None:
            result = await _yielding(session, owner, method, dumped, limit)
        else:
            _refused_for_want_of_a_route(session, limit)
            result = await answer(None, method, dumped)  # raises: nobody can answer it
    except MCPError as exc:
        return exc.error
    return ClientResponse.validate_python(result)


def client_callbacks(question_timeout: float) -> dict[str, Any]:
    """`mcp.Client` arguments that declare elicitation and sampling and route each request to its call;
    `question_timeout` is the connection's `timeouts.question` (module docstring)."""

    async def elicitation(context: ClientRequestContext, params: mt.ElicitRequestParams) -> Any:
        return await _callback(context.session, "elicitation/create", params, question_timeout)

    async def sampling(context: ClientRequestContext, params: mt.CreateMessageRequestParams) -> Any:
        return await _callback(context.session, "sampling/createMessage", params, question_timeout)

    return {"elicitation_callback": elicitation, "sampling_callback": sampling}
