"""Turn runners: the deterministic one and an OpenAI-compatible one, behind `TurnRunner`."""

from ._events import FinalText as FinalText
from ._events import MessageDelta as MessageDelta
from ._events import ToolCalled as ToolCalled
from ._events import ToolReturned as ToolReturned
from ._events import TurnEvent as TurnEvent
from ._events import Usage as Usage
from ._protocol import TurnRunner as TurnRunner
from .deterministic import DeterministicRunner as DeterministicRunner
from .deterministic import RunnerError as RunnerError

__all__ = [
    "DeterministicRunner",
    "FinalText",
    "MessageDelta",
    "RunnerError",
    "ToolCalled",
    "ToolReturned",
    "TurnEvent",
    "TurnRunner",
    "Usage",
]
