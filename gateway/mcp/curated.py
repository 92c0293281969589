"""Curated servers: `/v1/mcp/servers/<name>`, a view over the tools a caller may see (docs/curated-servers.md).

A view copies nothing and has no lane of its own: `tools/list` is the endpoint's listing (live, fail-closed,
after the policy, decided with `context.server` = the view's name) shown through `CuratedView.listed`, and a
`tools/call` of a view's name is resolved to the real tool, whose plan the one executor runs: the policy,
approval, limits, `mcp.lock` and the audit trail see the real tool (the record names the view's tool too,
`servedAs`, on the surface `mcp/servers/<name>`). A hidden argument takes its fixed value whatever the peer
sends. Governed search is meant to plug in as another such view over the same listing.

Resources and prompts are picked the same way (by connection, by URI or name, or a glob matched against the
canonical URI or template) out of the default endpoint's merged listings (`gateway/mcp/offerings.py`); a read,
get or completion of one the view does not pick gets the very answer of one no connection offers.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import mcp_types as mt
from mcp.shared.exceptions import MCPError

from connections import CuratedServer, NotOffered, Toolset, TurnTool
from connections.serving import Merged, Offerings, Selector, canonical_uri, not_offered

from .discovery import DiscoveryView

__all__ = ["CuratedView", "unknown_tool"]


def unknown_tool(name: str) -> MCPError:
    """What a name the view does not show gets: the default endpoint's words for an unknown tool."""
    return MCPError(mt.INVALID_PARAMS, f"Unknown tool: {name[:64]}", data={"error": "unknown_tool"})


_DISCOVERY: dict[tuple[str, tuple[str, ...]], DiscoveryView] = {}


@dataclass(frozen=True, slots=True)
class CuratedView:
    """The curated server `server` as a view over a listing (module docstring)."""

    server: CuratedServer

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def surface(self) -> str:
        """The audit surface of its calls."""
        return f"mcp/servers/{self.server.name}"

    @property
    def discovery(self) -> DiscoveryView | None:
        """Its discovery mode (`define_server(discovery=True)`, docs/discovery.md), None when off: one view per
        server and pins, which keeps its search indexes."""
        if not self.server.discovery:
            return None
        key = (self.name, self.server.always_visible)
        found = _DISCOVERY.get(key)
        if found is None:
            found = _DISCOVERY[key] = DiscoveryView(self.server.always_visible)
        return found

    def shown(self, toolset: Toolset) -> Toolset:
        """`toolset` (the caller's visible one) as the view shows it (`listed`), for discovery's search."""
        return Toolset(session=toolset.session, tools={t.name: t for t in self.listed(toolset)})

    def selector(self, tool: TurnTool) -> Selector | None:
        """The first entry of the server's `tools` that picks `tool` (None: the view does not show it)."""
        return next((s for s in self.server.tools if s.picks(tool.connection, tool.name, tool.annotations)), None)

    def listed(self, tools: Iterable[TurnTool]) -> list[TurnTool]:
        """The view's tools (renamed, retitled, described, hidden arguments gone), sorted by name. Raises
        `MCPError` when two of them end up with one name: fail closed, never one of them quietly dropped."""
        shown: dict[str, TurnTool] = {}
        for tool in tools:
            selector = self.selector(tool)
            if selector is None:
                continue
            view = _shaped(tool, selector)
            if view.name in shown:
                raise MCPError(
                    mt.INTERNAL_ERROR,
                    f"tools/list failed closed: curated server {self.name!r} shows two tools named {view.name!r}; "
                    f"rename one of them in agent/servers/{self.name}.py",
                    data={"error": "curated_name_collision"},
                )
            shown[view.name] = view
        return [shown[n] for n in sorted(shown)]

    def real_name(self, name: str) -> str:
        """The real tool a call of `name` is for. Raises `MCPError` (unknown tool) for a renamed tool's old name."""
        for s in self.server.tools:
            if s.rename == name and s.name is not None:
                return s.name
        if any(s.rename is not None and s.name == name for s in self.server.tools):
            raise unknown_tool(name)
        return name

    def arguments(self, tool: TurnTool, served_as: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The real call's arguments: `set` values where the peer gave none, hidden ones always fixed. Raises
        `MCPError` (unknown tool, in the view's name) when the view does not show `tool`."""
        selector = self.selector(tool)
        if selector is None or _shown_name(tool, selector) != served_as:
            raise unknown_tool(served_as)
        out = {**selector.fixed, **(arguments or {})}
        out.update({k: selector.fixed[k] for k in selector.hidden})
        return out

    def picks_any(self, kind: str) -> bool:
        """Whether the server picks any `kind` ("resources" or "prompts")."""
        return bool(self.server.prompts if kind == "prompts" else self.server.resources)

    def items(self, method: str, merged: Merged) -> list[dict[str, Any]]:
        """The items of the merged listing `method` the view picks."""
        return [
            item for item, conn in zip(merged.items, merged.connections, strict=True) if self._picks(method, conn, item)
        ]

    async def check(self, found: Offerings, method: str, key: str, viewer: str) -> None:
        """Raise `NotOffered` (the sentence of one no connection offers) unless the view picks the prompt, the
        resource or the resource template `key` (canonical) that `method` is for. A resource is picked when it
        is listed and picked, or is an instance of a template the view picks."""
        kind = {"prompts/get": "prompt", "resources/read": "resource"}.get(method, "resource template")
        if kind == "prompt":  # the routing's own refusal for one no connection offers or `mcp.lock` holds back
            owner = await found.owner_of_prompt(key, viewer)
            if any(s.picks(owner, key) for s in self.server.prompts):
                return
            raise NotOffered(not_offered(kind, key))
        listing = "resources/list" if kind == "resource" else "resources/templates/list"
        if await self._holds(found, listing, key, viewer):
            return
        if kind == "resource":
            for template in await found.templates_of(key, viewer):
                if await self._holds(found, "resources/templates/list", template, viewer, also=key):
                    return
            if any(s.name is not None and s.exact and s.name == key for s in self.server.resources):
                await found.owner_of_resource(key, viewer)  # held back by `mcp.lock`: its own sentence
        raise NotOffered(not_offered(kind, key))

    async def _holds(self, found: Offerings, method: Any, key: str, viewer: str, also: str | None = None) -> bool:
        merged = await found.listing(method, viewer)
        field = _ITEM_KEYS[method]
        for item, conn in zip(merged.items, merged.connections, strict=True):
            if _canonical(method, item.get(field)) == key:
                selectors = self.server.prompts if method == "prompts/list" else self.server.resources
                return self._picks(method, conn, item) or (
                    also is not None and any(s.picks(conn, also) for s in selectors)
                )
        return False

    def _picks(self, method: str, connection: str, item: Mapping[str, Any]) -> bool:
        selectors = self.server.prompts if method == "prompts/list" else self.server.resources
        name = _canonical(method, item.get(_ITEM_KEYS[method]))
        return any(s.picks(connection, name) for s in selectors)


_ITEM_KEYS = {"resources/list": "uri", "resources/templates/list": "uriTemplate", "prompts/list": "name"}


def _canonical(method: str, value: object) -> str:
    """An item's key as a view matches it: a resource's URI or template in its canonical form."""
    if method == "prompts/list":
        return str(value)
    return canonical_uri(str(value), template=method == "resources/templates/list")


def _shown_name(tool: TurnTool, selector: Selector) -> str:
    return selector.rename or tool.name


def _shaped(tool: TurnTool, selector: Selector) -> TurnTool:
    """`tool` as the view lists it (only for listing: a call runs the real tool)."""
    schema: dict[str, Any] = copy.deepcopy(dict(tool.input_schema))
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for arg, value in selector.fixed.items():
            if arg in selector.hidden:
                properties.pop(arg, None)
            elif isinstance(properties.get(arg), dict):
                properties[arg]["default"] = value
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [r for r in required if r not in selector.hidden and r not in selector.fixed]
    return replace(
        tool,
        name=_shown_name(tool, selector),
        title=selector.title or tool.title,
        description=selector.description or tool.description,
        input_schema=schema,
    )
