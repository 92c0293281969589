"""Per-user grants (`grants="per_principal"`, docs/oauth.md#per-user-grants): whose call this is, and where it goes.

A `grants="per_principal"` connection is served from the identity pool only, one client per principal, each
opened and used with that principal's own `ConnectionAuth` (`Broker._grant_auth`, keyed by
`oauth.StoreKey(connection, url, principal)`). The principal is the task's `acting_for` (every gateway
surface sets it: `/v1/mcp/tools`, a session's turn, so also the `host.mcp` calls agent code makes in it);
a call naming none is refused, never served with someone else's grant or session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

import mcp_types as mt

from .._exceptions import ConnectionUnavailable
from ..client._identity import SessionHeaders, acting_principal, principal_partition
from ..project._definitions import ConnectionDefinition
from ._identity_pool import IdentityPool

__all__ = ["PrincipalCalls", "partition_of"]


def partition_of(defn: ConnectionDefinition) -> SessionHeaders:
    """The calling principal's own upstream session of a `per_principal` connection (docs/connections.md).

    A call outside every gateway surface (no `acting_for`) is refused rather than served from a session
    (or, with `grants="per_principal"`, a grant) that belongs to another principal."""
    principal = acting_principal()
    if principal is None:
        raise ConnectionUnavailable(
            defn.name,
            "upstream_sessions='per_principal' keeps one upstream session per principal, and this call "
            "names none; call it through the gateway (or inside connections.acting_for(principal_id))",
        )
    return principal_partition(principal)


class PrincipalCalls:
    """`host.mcp`'s route for `grants="per_principal"` connections: listings and calls as the acting principal,
    on its own client with its own grant (never the shared pool's)."""

    def __init__(self, identities: IdentityPool, connections: Mapping[str, ConnectionDefinition]) -> None:
        self._identities = identities
        self._defs = {n: d for n, d in connections.items() if d.grants == "per_principal"}

    def serves(self, name: str) -> bool:
        return name in self._defs

    async def list_tools(self, name: str, *, use_cache: bool = False) -> list[mt.Tool]:
        defn = self._defs[name]
        return await self._identities.list_identity_tools(name, partition_of(defn), use_cache=use_cache)

    def call_tool(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> Awaitable[dict[str, Any]]:
        return self._identities.call_identity_tool(name, tool, arguments, partition_of(self._defs[name]))
