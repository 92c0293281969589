"""`OpenAIRunner`: drives an OpenAI-compatible chat-completions endpoint with the turn's toolset.

Environment (read once, at `serve` start):
- `AGENT_SDK_OPENAI_BASE_URL` (or `OPENAI_BASE_URL`; default `https://api.openai.com/v1`)
- `AGENT_SDK_OPENAI_MODEL` (or `OPENAI_MODEL`; required)
- `AGENT_SDK_OPENAI_API_KEY` (or `OPENAI_API_KEY`; optional for local servers)
- `AGENT_SDK_OPENAI_MAX_STEPS` (default 8): model calls per turn before the turn fails

Each step sends the conversation and the toolset as `tools` (type `function`); tool calls the
model makes run through the toolset (so fail-closed building and per-session auth hold) and their
results go back as `tool` messages, until the model answers without a tool call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx2
from pydantic import SecretStr

from connections import ConnectionsError, SessionInfo, Toolset

from ..http._asgi import loads_bounded
from ._events import FinalText, MessageDelta, ToolCalled, ToolReturned, TurnEvent, Usage
from .deterministic import RunnerError

__all__ = ["OpenAIRunner"]


def _env(environ: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        if environ.get(name):
            return environ[name]
    return None


class OpenAIRunner:
    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: SecretStr | None = None,
        max_steps: int = 8,
        timeout_s: float = 120.0,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self.max_steps = max_steps
        self.timeout_s = timeout_s
        self._transport = transport

    def __repr__(self) -> str:
        return f"OpenAIRunner(base_url={self.base_url!r}, model={self.model!r}, max_steps={self.max_steps})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> OpenAIRunner:
        """Raises `ValueError` naming the variable that is missing or wrong."""
        model = _env(environ, "AGENT_SDK_OPENAI_MODEL", "OPENAI_MODEL")
        if not model:
            raise ValueError("--runner openai needs AGENT_SDK_OPENAI_MODEL (or OPENAI_MODEL) set")
        key = _env(environ, "AGENT_SDK_OPENAI_API_KEY", "OPENAI_API_KEY")
        steps = _env(environ, "AGENT_SDK_OPENAI_MAX_STEPS") or "8"
        if not steps.isdigit() or int(steps) < 1:
            raise ValueError("AGENT_SDK_OPENAI_MAX_STEPS must be a positive integer")
        return cls(
            base_url=_env(environ, "AGENT_SDK_OPENAI_BASE_URL", "OPENAI_BASE_URL") or "https://api.openai.com/v1",
            model=model,
            api_key=SecretStr(key) if key else None,
            max_steps=int(steps),
        )

    async def run(
        self, session: SessionInfo, message: str, toolset: Toolset, *, history: Sequence[tuple[str, str]] = ()
    ) -> AsyncIterator[TurnEvent]:
        messages: list[dict[str, Any]] = [{"role": role, "content": text} for role, text in history]
        messages.append({"role": "user", "content": message})
        functions = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description[:1024], "parameters": dict(t.input_schema)},
            }
            for t in toolset
        ]
        headers = {"content-type": "application/json"}
        if self._api_key is not None:
            headers["authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        used_in = used_out = 0
        async with httpx2.AsyncClient(timeout=self.timeout_s, transport=self._transport) as client:
            for _step in range(self.max_steps):
                body: dict[str, Any] = {"model": self.model, "messages": messages}
                if functions:
                    body["tools"] = functions
                reply = await self._complete(client, headers, body)
                usage = reply.get("usage") or {}
                used_in += int(usage.get("prompt_tokens", 0) or 0)
                used_out += int(usage.get("completion_tokens", 0) or 0)
                choice = _first_message(reply)
                calls = choice.get("tool_calls") or []
                if not calls:
                    text = str(choice.get("content") or "")
                    if text:
                        yield MessageDelta(text)
                    yield Usage(input_tokens=used_in, output_tokens=used_out)
                    yield FinalText(text)
                    return
                messages.append({"role": "assistant", "content": choice.get("content"), "tool_calls": calls})
                for call in calls:
                    async for event in self._run_call(toolset, call, messages):
                        yield event
        raise RunnerError(f"the model did not give a final answer within {self.max_steps} steps")

    async def _complete(
        self, client: httpx2.AsyncClient, headers: dict[str, str], body: dict[str, Any]
    ) -> dict[str, Any]:
        try:
            response = await client.post(f"{self.base_url}/chat/completions", json=body, headers=headers)
        except httpx2.HTTPError as exc:
            raise RunnerError(f"the model endpoint could not be reached ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise RunnerError(f"the model endpoint answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise RunnerError("the model endpoint answered with something that is not JSON") from None
        if not isinstance(data, dict):
            raise RunnerError("the model endpoint's answer is not a JSON object")
        return data

    async def _run_call(
        self, toolset: Toolset, call: dict[str, Any], messages: list[dict[str, Any]]
    ) -> AsyncIterator[TurnEvent]:
        call_id = str(call.get("id") or "call")
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        try:
            arguments = loads_bounded(function.get("arguments") or "{}")
        except ValueError:  # JsonRefused too: a model's deep or unencodable arguments are no arguments
            arguments = None
        yield ToolCalled(call_id, name, arguments if isinstance(arguments, dict) else {})
        tool = toolset.get(name)
        is_error = True
        if tool is None:
            result: Any = f"unknown tool {name!r}; available: {', '.join(toolset.names())}"
        elif not isinstance(arguments, dict):
            result = "the arguments are not a JSON object"
        else:
            try:
                outcome = await tool.call(arguments)
                is_error, result = outcome.is_error, outcome.result
            except ConnectionsError as exc:
                result = str(exc)
            except Exception as exc:  # boundary: the tool body raised; the model sees an error result
                result = f"{type(exc).__name__}: {exc}"[:500]
        yield ToolReturned(call_id, name, is_error, result)
        content = result if isinstance(result, str) else json.dumps(result, default=str)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})


def _first_message(reply: dict[str, Any]) -> dict[str, Any]:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RunnerError("the model endpoint's answer has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise RunnerError("the model endpoint's answer has no message")
    return message
