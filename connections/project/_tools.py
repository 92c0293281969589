"""`define_tool(...)`: an authored server tool (`agent/tools/<name>.py`), and how it runs."""

# Definition files are untyped user code: the runtime isinstance checks on typed parameters are the point.
# pyright: reportUnnecessaryIsInstance=false, reportUnnecessaryComparison=false

from __future__ import annotations

import difflib
import inspect
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ValidationError

from .._exceptions import ToolInputError
from ._problems import Problem

__all__ = ["Effect", "ServerTool", "ToolContext", "define_tool"]

Effect = Literal["read", "write"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What `execute(input, ctx)` receives besides its input.

    `host.mcp` is the host registry (static headers only, never a session's `auth`); `session`
    is the bound session's `SessionInfo`, or None for an unbound direct call.
    """

    host: Any
    session: Any = None
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ServerTool:
    """An authored tool that runs in the gateway process."""

    description: str
    execute: Callable[..., Any] = field(repr=False, compare=False)
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    input_model: type[BaseModel] | None = None
    output_schema: Mapping[str, Any] | None = None
    effect: Effect | None = None
    """`read` runs alongside a busy session's turn; `write` or undeclared waits (409 session_busy)."""
    title: str | None = None
    name: str = ""
    source: Path | None = None
    line: int | None = None
    problems: tuple[Problem, ...] = field(default=(), repr=False, compare=False)

    def named(self, name: str, source: Path | None) -> ServerTool:
        return replace(self, name=name, source=source)

    def validate_input(self, arguments: object) -> Any:
        """The input `execute` receives: a model instance, or the dict for a plain JSON Schema.

        Raises `ToolInputError` with one sentence per invalid field. Plain JSON Schema input is
        checked only for being an object (as upstream MCP servers validate their own input).
        """
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolInputError(self.name, f"input must be a JSON object, got {type(arguments).__name__}")
        if self.input_model is None:
            return arguments
        try:
            return self.input_model.model_validate(arguments)
        except ValidationError as exc:
            details = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolInputError(self.name, details) from None

    async def run(self, arguments: object, ctx: ToolContext) -> Any:
        """Validate `arguments` and run `execute` (sync bodies run in a worker thread).

        Raises `ToolInputError` for bad input; anything `execute` raises propagates unchanged.
        """
        value = self.validate_input(arguments)
        if inspect.iscoroutinefunction(self.execute):
            result = await self.execute(value, ctx)
        else:
            result = await anyio.to_thread.run_sync(self.execute, value, ctx)
            if inspect.isawaitable(result):
                result = await result
        if isinstance(result, BaseModel):
            return result.model_dump(mode="json")
        return result


def _never_called(_value: Any, _ctx: ToolContext) -> Any:
    return None


def define_tool(
    *,
    description: str,
    execute: Callable[..., Any],
    input: type[BaseModel] | Mapping[str, Any] | None = None,
    effect: str | None = None,
    title: str | None = None,
    output_schema: Mapping[str, Any] | None = None,
    **unknown: Any,
) -> ServerTool:
    """Define an authored server tool; its name comes from the file name.

    `input` is a pydantic model (validated before `execute`) or a JSON Schema dict (forwarded as
    is); `effect` is "read" or "write". Never raises: problems are reported by `agent-sdk validate`.
    """
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]  # the tool file's call site
    origin, line = Path(frame.f_code.co_filename), frame.f_lineno
    problems: list[Problem] = []
    known = ("description", "execute", "input", "effect", "title", "output_schema")
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(known)}"
        problems.append(Problem("unknown-field", f"unknown field {key!r} in define_tool(...){hint}"))
    if not isinstance(description, str) or not description.strip():
        problems.append(Problem("missing-description", "define_tool(...) needs a non-empty description string"))
        description = ""
    if not callable(execute):
        problems.append(Problem("bad-field-type", "field 'execute' must be a function execute(input, ctx)"))

        execute = _never_called  # the file has an error, so the tool is never registered

    input_model: type[BaseModel] | None = None
    schema: Mapping[str, Any] = {"type": "object", "properties": {}}
    if isinstance(input, type) and issubclass(input, BaseModel):
        input_model = input
        schema = input.model_json_schema()
    elif isinstance(input, Mapping):
        if input.get("type", "object") != "object":
            problems.append(Problem("bad-input-schema", "field 'input' must be a JSON Schema of type 'object'"))
        schema = dict(input)
    elif input is not None:
        problems.append(Problem("bad-field-type", "field 'input' must be a pydantic model class or a JSON Schema dict"))
    if effect is not None and effect not in ("read", "write"):
        problems.append(Problem("bad-effect", f"field 'effect' must be 'read' or 'write', got {effect!r}"))
        effect = None
    return ServerTool(
        description=description,
        execute=execute,
        input_schema=schema,
        input_model=input_model,
        output_schema=output_schema,
        effect=effect,
        title=title,
        source=origin,
        line=line,
        problems=tuple(problems),
    )
