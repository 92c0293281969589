"""Discovery mode (`serve --discovery`, docs/discovery.md): a view over the tools one caller may see.

In discovery mode an endpoint's `tools/list` answers with three meta-tools and the tools the operator
pins (`--discovery-pin NAME_OR_GLOB`) rather than every tool:

- `search_tools {query, limit?}`: the full definitions of the best matches (`tool_search.py`, BM25);
- `describe_tool {name}`: one tool's full definition;
- `call_tool {name, arguments?}`: calls a tool by name.

The view is handed the endpoint's `Visible`: "the tools this caller may see here", after the policy (for
`/v1/mcp/tools` and `serve --stdio`, the live listing narrowed by `visible_tools`). Search and describe
read nothing else, so a hidden tool is never returned, counted or hinted at. `call_tool` is not a tool
that runs another one: the endpoint's edge rewrites its request into the named tool's own `tools/call`
(`unwrapped`) before anything looks the tool up, so the one executor (`pipeline.py`) runs the real tool
with its policy, approval, limits, pinning, audit, progress, cancellation and elicitation, and an
unknown or hidden name answers word for word as it would called directly.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError

from connections import ToolInputError, ToolOutcome, Toolset, TurnTool

from ..settings import ServeSettings
from .tool_search import IndexCache

__all__ = ["CALL", "DESCRIBE", "META_NAMES", "SEARCH", "DiscoveryView", "MetaTool", "Visible", "unwrapped"]

SEARCH = "search_tools"
DESCRIBE = "describe_tool"
CALL = "call_tool"
META_NAMES = frozenset({SEARCH, DESCRIBE, CALL})
_LIMIT, _MAX_LIMIT = 5, 20

Visible = Callable[[], Awaitable[Toolset]]
"""The tools the caller may see on this endpoint (after the policy); raises as the endpoint's `tools/list` does."""

_SCHEMAS: dict[str, dict[str, Any]] = {
    SEARCH: {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What you want to do, in plain words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": _MAX_LIMIT, "description": "At most this many."},
        },
        "required": ["query"],
    },
    DESCRIBE: {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The tool's exact name."}},
        "required": ["name"],
    },
    CALL: {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The tool's exact name, from search_tools."},
            "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema says."},
        },
        "required": ["name"],
    },
}
_DESCRIPTIONS = {
    SEARCH: "Find tools for a task: returns the full definitions (name, description, inputSchema) of the best "
    "matches. Search first, then call one with call_tool.",
    DESCRIBE: "The full definition of one tool, by its exact name.",
    CALL: "Call a tool by name with its arguments (find it with search_tools first).",
}


@dataclass(frozen=True, slots=True)
class MetaTool(TurnTool):
    """`search_tools` or `describe_tool` for one caller: it reads the view, runs nothing upstream (so no audit,
    limit or approval applies: `pipeline.Executor` lets it through unguarded)."""


def definition(tool: TurnTool) -> dict[str, Any]:
    """A tool's full MCP definition, as `tools/list` would list it."""
    data: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": dict(tool.input_schema)}
    if tool.title:
        data["title"] = tool.title
    if tool.output_schema is not None:
        data["outputSchema"] = dict(tool.output_schema)
    if tool.annotations:
        data["annotations"] = dict(tool.annotations)
    if tool.execution:
        data["execution"] = dict(tool.execution)
    return data


def _catalog(toolset: Toolset) -> str:
    """The catalog line of `search_tools`' description: the caller's visible connections, by name."""
    names = sorted({t.connection for t in toolset if t.connection} | ({"(authored)"} if any(
        t.connection is None for t in toolset) else set()))  # fmt: skip
    return f" Servers you can reach: {', '.join(names)}." if names else ""


class DiscoveryView:
    """Discovery mode over one endpoint (module docstring). One per runtime: it keeps the search indexes."""

    __slots__ = ("_indexes", "pins")

    def __init__(self, pins: tuple[str, ...] = ()) -> None:
        self.pins = pins
        self._indexes = IndexCache()

    @classmethod
    def of(cls, settings: ServeSettings) -> DiscoveryView | None:
        """The view `settings` ask for: None when discovery mode is off."""
        return cls(settings.discovery_pins) if settings.discovery else None

    def listed(self, toolset: Toolset) -> list[dict[str, Any]]:
        """`tools/list` in discovery mode: the meta-tools, then the pinned tools `toolset` (the visible ones) has."""
        metas = [self._meta_definition(name, toolset) for name in (SEARCH, DESCRIBE, CALL)]
        pinned = [definition(t) for t in sorted(toolset, key=lambda t: t.name) if self._pinned(t.name)]
        return metas + [p for p in pinned if p["name"] not in META_NAMES]

    def tool(self, name: str, visible: Visible) -> MetaTool | None:
        """The meta-tool `name` for a caller whose visible tools `visible` gives (None for another name;
        `call_tool` only when its request was malformed, since `unwrapped` rewrote every well-formed one)."""
        if name not in META_NAMES:
            return None

        async def invoke(arguments: Mapping[str, Any]) -> ToolOutcome:
            if name == CALL:
                raise ToolInputError(CALL, "give 'name', a string, and 'arguments', an object: the tool's arguments")
            try:
                toolset = await visible()
            except MCPError as exc:  # failed closed (a sign-in link with it): the whole sentence, never fewer tools
                return ToolOutcome(is_error=True, result={"message": exc.error.message, **(exc.error.data or {})})
            return await (self._search if name == SEARCH else self._describe)(arguments, toolset)

        return MetaTool(
            name=name, description=_DESCRIPTIONS[name], input_schema=_SCHEMAS[name], source="meta", invoke=invoke
        )

    async def _search(self, arguments: Mapping[str, Any], toolset: Toolset) -> ToolOutcome:
        query, limit = arguments.get("query"), arguments.get("limit", _LIMIT)
        if not isinstance(query, str) or not query.strip():
            raise ToolInputError(SEARCH, "give 'query': what you want to do, in plain words")
        if type(limit) is not int or not 1 <= limit <= _MAX_LIMIT:
            raise ToolInputError(SEARCH, f"'limit' must be a whole number from 1 to {_MAX_LIMIT}")
        found = self._indexes.index(toolset).search(query, limit)
        return ToolOutcome(is_error=False, result={"tools": [definition(t) for t in found]})

    async def _describe(self, arguments: Mapping[str, Any], toolset: Toolset) -> ToolOutcome:
        name = arguments.get("name")
        if not isinstance(name, str):
            raise ToolInputError(DESCRIBE, f"give 'name': the tool's exact name, from {SEARCH}")
        tool = toolset.get(name)
        if tool is None:  # unknown and hidden alike, in the words of an unknown tool's call
            return ToolOutcome(is_error=True, result=f"Unknown tool: {name[:64]}")
        return ToolOutcome(is_error=False, result=definition(tool))

    def _meta_definition(self, name: str, toolset: Toolset) -> dict[str, Any]:
        description = _DESCRIPTIONS[name] + (_catalog(toolset) if name == SEARCH else "")
        return {"name": name, "description": description, "inputSchema": _SCHEMAS[name]}

    def _pinned(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pin) for pin in self.pins)


def unwrapped(view: DiscoveryView | None, params: Any) -> Any:
    """A `tools/call`'s params with a well-formed `call_tool {name, arguments}` rewritten into the named tool's
    own call (its `_meta` kept), so it is looked up, decided, run and audited as that tool; anything else as is."""
    if view is None or not isinstance(params, Mapping) or params.get("name") != CALL:
        return params
    inner = params.get("arguments")
    if not isinstance(inner, Mapping):
        return params
    name, arguments = inner.get("name"), inner.get("arguments", {})
    if (
        not isinstance(name, str)
        or name == CALL
        or not isinstance(arguments, Mapping)
        or set(inner) - {"name", "arguments"}
    ):
        return params
    return {**params, "name": name, "arguments": dict(arguments)}
