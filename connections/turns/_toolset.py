"""`Toolset` and `TurnTool`: the tools one turn may call, each bound to that turn's identity."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._exceptions import TurnProblem
from ..project._tools import Effect
from ._session import SessionInfo

if TYPE_CHECKING:
    from ..client._passthrough import UpstreamResult

__all__ = ["CallObserver", "ToolOutcome", "ToolSource", "Toolset", "TurnTool", "observed"]

ToolSource = Literal["authored", "extension", "advertised", "meta"]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced; `is_error` means the tool body failed (an upstream `isError: true`,
    or an authored `execute` that raised).

    `result` is JSON-able. For a passthrough (advertised or meta `mcp_call_tool`) call it is the
    upstream's MCP `CallToolResult` as JSON, as the pool returned it less the spec-reserved `_meta` keys
    (`passthrough=True`);
    for an authored tool it is the value its `execute` returned.
    """

    is_error: bool
    result: Any
    passthrough: bool = False
    upstream: UpstreamResult | None = field(default=None, repr=False, compare=False)
    """For a passthrough from a pooled session: the upstream's result with its bytes, which a forwarding
    server splices into its answer where nothing has to change (`client/_passthrough.py`)."""

    def mcp_result(self) -> dict[str, Any]:
        """The MCP `CallToolResult` (JSON, not yet shaped for a version) that an MCP surface answers with.

        A passthrough result as the pool returned it (`outcome_from_mcp` dropped the upstream's reserved
        `_meta` keys); an authored value as one JSON text block, and as structured content when it is an object.
        """
        if self.passthrough:
            return self.result
        value = self.result
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        out: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": self.is_error}
        if isinstance(value, dict):
            out["structuredContent"] = value
        return out


Invoke = Callable[[Mapping[str, Any]], Awaitable[ToolOutcome]]


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
    header_params: bool = False
    """Its input schema marks parameters `x-mcp-header` (MCP 2026-07-28): a server checks the
    `Mcp-Param-*` headers of a call against them."""
    execution: Mapping[str, Any] | None = None
    """For advertised tools: the upstream's `execution` (MCP 2025-11-25, `taskSupport`), passed on to peers."""

    def call(self, arguments: Mapping[str, Any] | None = None) -> Awaitable[ToolOutcome]:
        """Run the tool (a coroutine to await). Raises `ToolInputError` for bad input and the connection
        errors for upstream failures."""
        return self.invoke(arguments or {})


@dataclass(frozen=True, slots=True)
class Toolset:
    """The exact set of tools a turn gets: all of them or (on any problem) none, never fewer."""

    session: SessionInfo | None
    tools: Mapping[str, TurnTool]
    held_back: Mapping[str, str] = field(default_factory=dict[str, str])
    """Tools an upstream lists but `mcp.lock` does not pin as they are now: name -> the sentence saying
    what changed. Never in `tools`; a call to one is refused with that sentence."""

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

    def listing_failed(self, problems: list[TurnProblem]) -> None:
        """A toolset was built without some connections: each problem names one and its cause."""
        ...  # pragma: no cover - protocol


def observed(tool: TurnTool, observer: CallObserver) -> TurnTool:
    """`tool` with its calls reported to `observer`."""
    invoke = tool.invoke

    async def watched(arguments: Mapping[str, Any]) -> ToolOutcome:
        started = time.perf_counter()
        try:
            result = await invoke(arguments)
        except Exception as exc:
            observer.call_finished(tool, time.perf_counter() - started, exc, True)
            raise
        observer.call_finished(tool, time.perf_counter() - started, None, result.is_error)
        return result

    return replace(tool, invoke=watched)
