"""`host.mcp.call_tool(..., elicitation=..., sampling=...)`: host code's handlers for an upstream's input requests.

A handler takes the request's params as the SDK's model and returns the SDK's result model, as an
`mcp.Client` callback does without its context argument; raising `mcp.shared.exceptions.MCPError`
refuses the request (the upstream gets that JSON-RPC error). The handlers are put in the call's
`CallContext` as JSON handlers (`connections/client/_input_requests.py` routes each request to them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import mcp_types as mt
from pydantic import TypeAdapter

from .._call_context import CallContext, InputHandler, calling, current_call

__all__ = ["ElicitationHandler", "SamplingHandler", "with_handlers"]

ElicitationHandler = Callable[[mt.ElicitRequestParams], Awaitable[mt.ElicitResult]]
SamplingHandler = Callable[
    [mt.CreateMessageRequestParams], Awaitable[mt.CreateMessageResult | mt.CreateMessageResultWithTools]
]

_ELICIT_PARAMS: TypeAdapter[mt.ElicitRequestParams] = TypeAdapter(mt.ElicitRequestParams)


def _dumped(result: Any) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _elicitation(handler: ElicitationHandler) -> InputHandler:
    async def handle(params: dict[str, Any]) -> dict[str, Any]:
        return _dumped(await handler(_ELICIT_PARAMS.validate_python(params)))

    return handle


def _sampling(handler: SamplingHandler) -> InputHandler:
    async def handle(params: dict[str, Any]) -> dict[str, Any]:
        return _dumped(await handler(mt.CreateMessageRequestParams.model_validate(params)))

    return handle


@contextmanager
def with_handlers(
    *, elicitation: ElicitationHandler | None, sampling: SamplingHandler | None
) -> Generator[CallContext]:
    """Run the block's call with these handlers, on top of the context already set (progress, logs), if any."""
    asks = _elicitation(elicitation) if elicitation is not None else None
    samples = _sampling(sampling) if sampling is not None else None
    outer = current_call()
    if outer is None:
        context = CallContext(elicitation=asks, sampling=samples)
    else:
        context = replace(outer, elicitation=asks, sampling=samples)
    with calling(context):
        yield context
