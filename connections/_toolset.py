"""`Toolset` and `TurnTool`: the tools one turn may call, each bound to that turn's identity."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar

import mcp.types as mt

from ._raw_results import RawToolResult
from ._session import SessionInfo
from ._tools import Effect

__all__ = ["CallObserver", "ToolOutcome", "ToolSource", "Toolset", "TurnTool", "observed"]

ToolSource = Literal["authored", "extension", "advertised", "meta"]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced. `result` is JSON-able; `is_error` means the tool body failed
    (an upstream `isError: true`, or an authored `execute` that raised)."""

    is_error: bool
    result: Any
    content: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """MCP content blocks for MCP surfaces (upstream blocks as is; authored results as JSON text)."""
    structured: dict[str, Any] | None = None
    upstream: mt.CallToolResult | None = field(default=None, repr=False, compare=False)
    """For passthrough outcomes: the upstream's validated result, so an MCP surface need not rebuild it."""


Invoke = Callable[[Mapping[str, Any]], Awaitable[ToolOutcome]]
_R = TypeVar("_R", ToolOutcome, RawToolResult)
InvokeRaw = Callable[[Mapping[str, Any]], Awaitable[RawToolResult]]


@dataclass(frozen=True, slots=True)
class TurnTool:
    """One tool in a turn's toolset. Calling it uses the identity the turn was built with."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    source: ToolSource
    invoke: Invoke = field(repr=False, compare=False)
    output_schema: Mapping[str, Any] | None = None
    annotations: Mapping[str, Any] | None = None
    effect: Effect | None = None
    title: str | None = None
    connection: str | None = None
    """For advertised tools: the connection it forwards to (the upstream name equals `name`)."""
    invoke_raw: InvokeRaw | None = field(default=None, repr=False, compare=False)
    """For pooled advertised tools: the call with its result kept as JSON (`call_raw`)."""

    async def call(self, arguments: Mapping[str, Any] | None = None) -> ToolOutcome:
        """Run the tool. Raises `ToolInputError` for bad input and the connection errors for upstream failures."""
        return await self.invoke(arguments or {})

    async def call_raw(self, arguments: Mapping[str, Any] | None = None) -> RawToolResult | None:
        """For a surface that forwards the result: the passthrough result as JSON, or None (use `call`)
        when this tool is not a pooled passthrough. Raises what `call` raises."""
        if self.invoke_raw is None:
            return None
        return await self.invoke_raw(arguments or {})


@dataclass(frozen=True, slots=True)
class Toolset:
    """The exact set of tools a turn gets: all of them or (on any problem) none, never fewer."""

    session: SessionInfo | None
    tools: Mapping[str, TurnTool]

    def __iter__(self) -> Iterator[TurnTool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def get(self, name: str) -> TurnTool | None:
        return self.tools.get(name)

    def names(self) -> list[str]:
        return sorted(self.tools)


class CallObserver(Protocol):
    """Told about every finished call of a tool a `TurnBuilder` built (the gateway's metrics and log).

    `failure` is the exception the call raised (None when it returned); `is_error` is true for a
    result with `isError` as well as for a failure. Must not raise, and must be quick.
    """

    def call_finished(
        self, tool: TurnTool, seconds: float, failure: Exception | None, is_error: bool
    ) -> None: ...  # pragma: no cover - protocol


def observed(tool: TurnTool, observer: CallObserver) -> TurnTool:
    """`tool` with its calls (both `call` and `call_raw`) reported to `observer`."""
    raw = tool.invoke_raw
    return replace(
        tool,
        invoke=_watched(tool, observer, tool.invoke),
        invoke_raw=None if raw is None else _watched(tool, observer, raw),
    )


def _watched(
    tool: TurnTool, observer: CallObserver, invoke: Callable[[Mapping[str, Any]], Awaitable[_R]]
) -> Callable[[Mapping[str, Any]], Awaitable[_R]]:
    async def watched(arguments: Mapping[str, Any]) -> _R:
        started = time.perf_counter()
        try:
            result = await invoke(arguments)
        except Exception as exc:
            observer.call_finished(tool, time.perf_counter() - started, exc, True)
            raise
        observer.call_finished(tool, time.perf_counter() - started, None, result.is_error)
        return result

    return watched
