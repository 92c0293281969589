"""The pool's one deadline per upstream operation (`ClientPool._operate`): asyncio's own `timeout` where the
loop is asyncio (what `serve` runs), an anyio cancel scope on another backend."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import anyio

__all__ = ["AnyioDeadline", "deadline_for_this_loop"]


class AnyioDeadline:
    """`TimeoutError` once `budget` seconds have passed (anyio: any backend); an async context manager as
    `asyncio.timeout` is. A bare scope: a third of `fail_after`."""

    __slots__ = ("_scope",)

    def __init__(self, budget: float) -> None:
        self._scope = anyio.CancelScope(deadline=anyio.current_time() + budget)

    async def __aenter__(self) -> None:
        self._scope.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        suppressed = self._scope.__exit__(exc_type, exc, tb)
        if self._scope.cancelled_caught:
            raise TimeoutError
        return bool(suppressed)


def deadline_for_this_loop() -> Callable[[float], AbstractAsyncContextManager[Any]]:
    """The pool's one deadline, picked once when the pool is entered: on asyncio (what `serve` runs) its own
    `timeout` costs a fraction of an anyio cancel scope, which sets up state for every new task (and every
    request the gateway serves is one: 9 % of its CPU per passthrough call); anyio's on another backend."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return AnyioDeadline
    return asyncio.timeout
