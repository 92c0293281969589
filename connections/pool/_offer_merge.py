"""`merged`: the connections' listings of one method as one listing, fail-closed (`Offerings.listing`).

Two connections offering one resource URI, one template or one prompt name, or one upstream listing an item
twice, are problems naming both; any problem (these, or a connection that could not be listed) is a
`TurnBuildError` naming every one, never a shorter list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._exceptions import TurnBuildError, TurnProblem
from ..project._definitions import ConnectionDefinition
from ._offer_calls import STALE, Freshness, Listed, ListMethod

__all__ = ["Merged", "merged"]

# method -> (the result's list field, the key two connections must not share, what the key names, deny field)
_LISTS: dict[ListMethod, tuple[str, str, str, str]] = {
    "resources/list": ("resources", "uri", "resource", "deny_resources"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate", "resource template", "deny_resources"),
    "prompts/list": ("prompts", "name", "prompt", "deny_prompts"),
}


@dataclass(frozen=True, slots=True)
class Merged:
    """One listing across every advertised connection: the items (JSON, as the upstreams sent them,
    in connection order) and the hint of the whole (the smallest TTL; private if any part is)."""

    field: str
    items: list[dict[str, Any]]
    freshness: Freshness
    connections: tuple[str, ...] = ()
    """The connection each of `items` came from (a curated server picks by connection)."""


def merged(
    method: ListMethod,
    defns: Sequence[ConnectionDefinition],
    listings: Mapping[str, Listed],
    problems: list[TurnProblem],
) -> Merged:
    """`listings` (connection name -> its `method` listing) merged in the order of `defns`. Raises
    `TurnBuildError` naming every one of `problems` (the connections that could not be listed) and every
    collision."""
    result_field, key, subject, deny = _LISTS[method]
    owners: dict[str, str] = {}
    items: list[dict[str, Any]] = []
    sources: list[str] = []
    freshness: Freshness | None = None
    for defn in defns:
        listed = listings.get(defn.name)
        if listed is None:
            continue
        freshness = listed.freshness if freshness is None else freshness.joined(listed.freshness)
        for item in listed.items:
            name = str(item.get(key))
            if name in owners:
                again = owners[name] == defn.name
                problems.append(
                    TurnProblem(
                        "duplicate" if again else "collision",
                        f"the upstream lists this {subject} twice"
                        if again
                        else f"also offered by connection {owners[name]!r}; deny it on one of them with {deny}",
                        connection=defn.name,
                        tool=name[:200],
                        subject=subject,
                    )
                )
                continue
            owners[name] = defn.name
            items.append(item)
            sources.append(defn.name)
    if problems:
        problems.sort(key=lambda p: (p.connection or "", p.tool or "", p.code))
        raise TurnBuildError(problems)
    return Merged(result_field, items, freshness or STALE, tuple(sources))
