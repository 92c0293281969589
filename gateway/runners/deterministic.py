"""The deterministic runner: behaviour driven by the message, for demos and tests without a model.

Each line of the message is one step:
- `call <tool> <json>` calls that tool with that input (`{}` when omitted);
- `sleep <seconds>` waits (to make a turn observably busy);
- `fail <text>` ends the turn with an error;
- anything else is echoed back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence

import anyio

from connections import ConnectionsError, SessionInfo, Toolset

from ..errors import GatewayError
from ..http._asgi import JsonRefused, loads_bounded
from ._events import FinalText, MessageDelta, ToolCalled, ToolReturned, TurnEvent, Usage

__all__ = ["DeterministicRunner", "RunnerError"]


class RunnerError(GatewayError):
    """The runner could not finish the turn; the message is the sentence the session records."""


class DeterministicRunner:
    """See the module docstring for the message language."""

    name = "deterministic"

    async def run(
        self, session: SessionInfo, message: str, toolset: Toolset, *, history: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[TurnEvent]:
        replies: list[str] = []
        for raw in message.splitlines() or [""]:
            line = raw.strip()
            verb, _, rest = line.partition(" ")
            if verb == "call" and rest:
                name, _, arg_text = rest.strip().partition(" ")
                reply: str | None = None
                async for event in self._call(toolset, name, arg_text.strip() or "{}"):
                    if isinstance(event, ToolReturned):
                        reply = _summary(event)
                    yield event
                replies.append(reply or "")
            elif verb == "sleep" and rest:
                try:
                    seconds = float(rest)
                except ValueError:
                    raise RunnerError(f"sleep takes a number of seconds, got {rest!r}") from None
                await anyio.sleep(max(0.0, min(seconds, 600.0)))
            elif verb == "fail":
                raise RunnerError(rest or "the message asked the turn to fail")
            else:
                replies.append(raw)
                yield MessageDelta(raw + "\n")
        yield Usage(input_tokens=len(message.split()), output_tokens=sum(len(r.split()) for r in replies))
        yield FinalText("\n".join(replies).strip())

    async def _call(self, toolset: Toolset, name: str, arg_text: str) -> AsyncIterator[TurnEvent]:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        try:
            arguments = loads_bounded(arg_text)
        except JsonRefused as exc:
            raise RunnerError(f"call {name}: {exc}") from None
        if not isinstance(arguments, dict):
            raise RunnerError(f"call {name}: the input must be a JSON object")
        tool = toolset.get(name)
        yield ToolCalled(call_id, name, arguments)
        if tool is None:
            yield ToolReturned(
                call_id, name, True, f"unknown tool {name!r}; this turn has: {', '.join(toolset.names())}"
            )
            return
        try:
            outcome = await tool.call(arguments)
        except ConnectionsError as exc:
            yield ToolReturned(call_id, name, True, str(exc))
            return
        except Exception as exc:  # boundary: the tool body raised; the model would see an error result
            yield ToolReturned(call_id, name, True, f"{type(exc).__name__}: {exc}"[:500])
            return
        yield ToolReturned(call_id, name, outcome.is_error, outcome.result)


def _summary(event: ToolReturned) -> str:
    if isinstance(event.result, str):
        return event.result
    if isinstance(event.result, dict) and "content" in event.result:
        texts = [c.get("text", "") for c in event.result["content"] if isinstance(c, dict)]
        return "\n".join(t for t in texts if t)
    return json.dumps(event.result, default=str)
