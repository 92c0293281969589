"""What a turn runner yields while it works on one message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FinalText", "MessageDelta", "ToolCalled", "ToolReturned", "TurnEvent", "Usage"]


@dataclass(frozen=True, slots=True)
class MessageDelta:
    """A piece of the assistant's reply as it is produced."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCalled:
    call_id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolReturned:
    call_id: str
    name: str
    is_error: bool
    result: Any


@dataclass(frozen=True, slots=True)
class FinalText:
    """The turn's reply; the last event of a successful turn."""

    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


TurnEvent = MessageDelta | ToolCalled | ToolReturned | FinalText | Usage
