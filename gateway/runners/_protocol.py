"""`TurnRunner`: the plug point between a session and whatever answers its messages."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from connections import SessionInfo, Toolset

from ._events import TurnEvent

__all__ = ["TurnRunner"]


class TurnRunner(Protocol):
    """Runs one turn: reads `message`, may call tools from `toolset`, yields events, ends with `FinalText`.

    A runner never builds its own tools: `toolset` is exactly what the turn may use. Cancelling the
    iteration (a preempting follow-up, a stop) must leave nothing running.
    """

    name: str

    def run(
        self, session: SessionInfo, message: str, toolset: Toolset, *, history: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[TurnEvent]:
        """`history` is the conversation before `message`: `("user" | "assistant", text)` pairs, oldest first."""
        ...
