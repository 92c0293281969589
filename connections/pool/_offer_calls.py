"""Resources, prompts and completion on one upstream client: the calls behind `host.mcp` and `Offerings`.

Each function takes a live `mcp.Client` (the pool's session for the connection) and returns the
SDK's models. Listings walk every page (at most `LIST_PAGE_CAP`) and never use the client's own
response cache: the gateway honours the upstream's cache hints itself, per principal
(`connections/pool/_offer_cache.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as mt
from mcp import Client

from ..client._clients import LIST_PAGE_CAP

__all__ = [
    "STALE",
    "Freshness",
    "ListMethod",
    "Listed",
    "as_json",
    "complete",
    "freshness_of",
    "get_prompt",
    "list_every_page",
    "read_resource",
    "result_json",
]

ListMethod = Literal["resources/list", "resources/templates/list", "prompts/list"]


@dataclass(frozen=True, slots=True)
class Freshness:
    """An upstream's cache hint (MCP 2026-07-28 `ttlMs` / `cacheScope`): how long a result may be reused,
    and whether only within the authorization context that asked for it (`private`)."""

    ttl_ms: int
    private: bool

    def joined(self, other: Freshness) -> Freshness:
        """The hint of a result made of both parts: the smaller TTL, private if either part is."""
        return Freshness(min(self.ttl_ms, other.ttl_ms), self.private or other.private)

    def to_json(self) -> dict[str, Any]:
        return {"ttlMs": self.ttl_ms, "cacheScope": "private" if self.private else "public"}


STALE = Freshness(ttl_ms=0, private=True)
"""What a result without hints means: an upstream of a version before 2026-07-28 says nothing, so the
result is immediately stale and belongs to the context that asked (never a guess of `public`)."""


def freshness_of(result: mt.ListResourcesResult | mt.ListResourceTemplatesResult | Any) -> Freshness:
    """The hint `result` carried on the wire; a field the upstream did not send counts as `STALE`'s."""
    sent = result.model_fields_set
    ttl = result.ttl_ms if "ttl_ms" in sent else STALE.ttl_ms
    private = result.cache_scope != "public" if "cache_scope" in sent else STALE.private
    return Freshness(ttl_ms=max(0, int(ttl)), private=private)


@dataclass(frozen=True, slots=True)
class Listed:
    """Every item of one upstream listing (all pages) and the hint of the whole (the pages' hints joined)."""

    items: tuple[Any, ...]
    freshness: Freshness


async def list_every_page(client: Client, method: ListMethod) -> Listed:
    """`method` on `client`, every page. Raises what the client raises (the pool translates it)."""
    items: list[Any] = []
    hint: Freshness | None = None
    cursor: str | None = None
    for _ in range(LIST_PAGE_CAP):
        if method == "resources/list":
            page: Any = await client.list_resources(cursor=cursor, cache_mode="bypass")
            items.extend(page.resources)
        elif method == "resources/templates/list":
            page = await client.list_resource_templates(cursor=cursor, cache_mode="bypass")
            items.extend(page.resource_templates)
        else:
            page = await client.list_prompts(cursor=cursor, cache_mode="bypass")
            items.extend(page.prompts)
        here = freshness_of(page)
        hint = here if hint is None else hint.joined(here)
        cursor = page.next_cursor
        if not cursor:
            break
    return Listed(tuple(items), hint or STALE)


async def read_resource(client: Client, uri: str) -> mt.ReadResourceResult:
    """`resources/read` of `uri` (text and blob contents as the upstream sent them)."""
    return await client.read_resource(uri, cache_mode="bypass")


async def get_prompt(client: Client, name: str, arguments: Mapping[str, str] | None) -> mt.GetPromptResult:
    """`prompts/get` of `name` with `arguments`."""
    return await client.get_prompt(name, dict(arguments) if arguments else None)


async def complete(
    client: Client,
    ref: mt.PromptReference | mt.ResourceTemplateReference,
    argument: Mapping[str, str],
    context: Mapping[str, str] | None = None,
) -> mt.CompleteResult:
    """`completion/complete` of `argument` (`{"name": ..., "value": ...}`) for a prompt or a URI template."""
    return await client.complete(ref, dict(argument), dict(context) if context else None)


def as_json(model: Any) -> dict[str, Any]:
    """An SDK model as the JSON the wire carries (aliases, no unset fields)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


_ENVELOPE = frozenset({"ttlMs", "cacheScope", "resultType", "nextCursor"})


_RESERVED_META = "io.modelcontextprotocol/"


def result_json(result: Any) -> dict[str, Any]:
    """The upstream's result as JSON without its own envelope fields (the gateway sets those for its peer)
    and without the spec-reserved `_meta` keys that describe the upstream (its `serverInfo` stamp)."""
    out = {k: v for k, v in as_json(result).items() if k not in _ENVELOPE}
    meta = out.pop("_meta", None)
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if not str(k).startswith(_RESERVED_META)}
        if kept:
            out["_meta"] = kept
    return out
