"""`ToolCatalog`: the session-less toolset, listed live for catalogs and reused briefly for calls.

`tools/list` on `/v1/mcp/tools` rebuilds the toolset on every request (fail-closed, docs/connections.md;
each auth-less listing comes through the pool's listing cache, see docs/clients.md). A `tools/call`
reuses the last listing for `ttl` seconds so a call costs one upstream round trip, not a listing
plus a call; an unknown name or an expired listing lists again first. A call opens only the
connection it needs: an authored tool lists nothing, a tool whose connection an earlier listing
named lists that connection alone (and that one-connection listing is reused for `ttl` seconds too,
so a peer that stays open past `ttl` lists once per `ttl`, not once per call), and a listing that
left a failing connection out still serves the others' tools (one connection waiting for a login
does not touch every call); an upstream's `tools/list_changed` drops the reused listings at once
(`changed`). Session-bound toolsets
(per-session `auth`) are never cached: their headers are computed for every build. A tool that
differs from `mcp.lock` is held back (`Toolset.held_back`), not offered, and the rest are
(docs/connections.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from connections import SessionInfo, Toolset, TurnBuilder, TurnProblem, TurnTool
from connections.serving import Change

from ..errors import (
    ApiError,
    AuthorizationServerDown,
    ConnectionFailed,
    ConnectionNeedsLogin,
    ConnectionNotListed,
    ConnectionTimedOut,
    UnknownTool,
)

__all__ = ["BrokerLike", "ToolCatalog", "connection_errors", "missing_tool"]


class BrokerLike(Protocol):
    """What the gateway needs from `connections.Broker`: the turn builder (and the host registry)."""

    @property
    def builder(self) -> TurnBuilder: ...


@dataclass(slots=True)
class ToolCatalog:
    builder: TurnBuilder
    ttl: float = 30.0
    _cached: Toolset | None = None
    _stamp: float = 0.0
    clock: Callable[[], float] = time.monotonic
    _owners: dict[str, str] = field(default_factory=dict[str, str])
    """Advertised tool -> its connection, from the last listing (kept past `ttl`: it only picks what to list)."""
    _owned: dict[str, tuple[float, Toolset]] = field(default_factory=dict[str, tuple[float, Toolset]])
    """Connection -> when a call listed it alone, and that listing (reused for `ttl` like the full one)."""
    _seen: dict[str, str] = field(default_factory=dict[str, str])
    """Advertised tool -> its connection, from every listing so far (any caller's): picks which per-user
    connection a caller who can list none of them is asked to sign in to (`owner`)."""
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def live(self) -> Toolset:
        """The session-less toolset, listed now. Raises `TurnBuildError` (fail-closed)."""
        toolset = await self.builder.build(None, hold_back=True)
        self._remember(toolset)
        return toolset

    async def collect(self, session: SessionInfo | None) -> tuple[Toolset, list[TurnProblem]]:
        """What can be listed plus the problems (for `GET /v1/tools`, which reports `connectionErrors`)."""
        toolset, problems = await self.builder.collect(session, hold_back=True)
        if session is None:
            self._remember(toolset)
        return toolset, problems

    async def tool(
        self, name: str, session: SessionInfo | None = None
    ) -> tuple[TurnTool | None, Toolset, list[TurnProblem]]:
        """The named tool for a call, opening only the connection it needs (see the module docstring).

        Session-less calls reuse a fresh listing; bound ones build anew."""
        authored = self.builder.authored(name, session)
        if authored is not None:
            return authored, Toolset(session=session, tools={name: authored}), []
        if session is not None:
            toolset, problems = await self.builder.collect(session, hold_back=True)
            return toolset.get(name), toolset, problems
        # A held-back name is built again (from the cached listing): `pin --update` may have let it in.
        if (cached := self._reused(name)) is not None:
            return cached.get(name), cached, []
        async with self._lock:
            if (cached := self._reused(name)) is not None:
                return cached.get(name), cached, []
            owner = self._owners.get(name)
            if owner is not None:
                toolset, problems = await self.builder.collect(None, only=owner, hold_back=True)
                tool = toolset.get(name)
                if tool is not None and not problems:
                    self._owned[owner] = (self.clock(), toolset)
                    return tool, toolset, []
            toolset, problems = await self.collect(None)
        return toolset.get(name), toolset, problems

    def owner(self, name: str) -> str | None:
        """The connection that offers tool `name` as far as any listing so far, or `mcp.lock`, says (None: unknown)."""
        seen = self._seen.get(name)
        if seen is not None:
            return seen
        pins = self.builder.pins
        return pins.owner(name) if pins is not None else None

    def changed(self, connection: str, change: Change) -> None:
        """A `ListingCache` watcher: an upstream's tools changed, so the reused listing must not serve a call."""
        if change.kind == "tools":
            self._cached = None
            self._owned.pop(connection, None)

    def forget(self) -> None:
        """The project's definitions were reloaded (`gateway/reloads.py`): nothing listed before serves a call."""
        self._cached = None
        self._owned.clear()
        self._owners = {}

    def _reused(self, name: str) -> Toolset | None:
        """A listing within its `ttl` that names `name`: the full one, else the one of `name`'s connection."""
        now = self.clock()
        if self._cached is not None and now - self._stamp < self.ttl and name in self._cached:
            return self._cached
        owner = self._owners.get(name)
        owned = self._owned.get(owner) if owner is not None else None
        if owned is not None and now - owned[0] < self.ttl and name in owned[1]:
            return owned[1]
        return None

    def _remember(self, toolset: Toolset) -> None:
        self._cached = toolset
        self._stamp = self.clock()
        self._owned.clear()
        self._owners = {t.name: t.connection for t in toolset if t.connection is not None}
        self._seen.update(self._owners)


_NOT_LISTED: dict[str, type[ConnectionNotListed]] = {
    "connection_unavailable": ConnectionNotListed,
    "connection_starting": ConnectionNotListed,
    "environment_variable_missing": ConnectionNotListed,
    "account_not_configured": ConnectionNotListed,
    "authorization_server_unreachable": AuthorizationServerDown,
    "connection_unauthorized": ConnectionNeedsLogin,
    "account_unauthorized": ConnectionNeedsLogin,
    "upstream_timeout": ConnectionTimedOut,
    "listing_timeout": ConnectionTimedOut,
}


def connection_errors(problems: list[TurnProblem]) -> list[dict[str, Any]]:
    return [p.to_json() for p in problems]


def missing_tool(name: str, available: list[str], problems: list[TurnProblem], verb: str = "callable tool") -> ApiError:
    """The refusal for a tool `name` that the listing lacks: 404 `unknown_tool` when every connection was
    listed; else the cause of the connection that could not be (the tool may be there): its code and a
    status that fits (401, 502, 503, 504), naming the connection."""
    shown = repr(name[:64])
    extra: dict[str, Any] = {"available": available}
    if not problems:
        return UnknownTool(f"no {verb} named {shown}", **extra)
    extra["connectionErrors"] = connection_errors(problems)
    # A problem about this very tool (a collision, an invalid name) is the cause; else the first failing connection.
    cause = next((p for p in problems if p.tool == name), problems[0])
    failing = sorted({p.connection for p in problems if p.connection is not None})
    names = ", ".join(repr(c) for c in failing)
    kind = _NOT_LISTED.get(cause.code, ConnectionFailed)
    return kind(
        f"no listed connection offers a tool named {shown}, and connection{'s' if len(failing) != 1 else ''} "
        f"{names} could not be listed, so it may be there: {cause}",
        connection=cause.connection,
        cause=cause.code,
        **extra,
    )
