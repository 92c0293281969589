"""`Offerings`: the resources, resource templates and prompts that advertised connections offer to the
peers of `/v1/mcp/tools`, merged fail-closed, and the routing of each read, get and completion to the
one connection that owns it. A connection whose server does not declare the capability offers
nothing (and the gateway's log says so once), rather than failing every listing with its refusal.

A connection offers what `advertise_resources` / `advertise_prompts` (less `deny_resources` /
`deny_prompts`) let through; connections with a per-session `auth` take no part (the endpoint has no
session), nor do host-only and account connections (`agent-sdk validate` says so). As for tools
(docs/connections.md), a listing is all or nothing: a connection that cannot be listed, or two connections
offering one resource URI, one template or one prompt name, fail it with a `TurnBuildError` naming
every problem, never a shorter list.

Routing asks the listings of the connections whose own lists allow the URI, template or name: one that
no listing holds is a `NotOffered` before any upstream sees it, but for a read that only one connection's
lists allow (routed there unlisted; an upstream's own "not found" of it is answered with the same
sentence, `not_offered`), so a name that does not exist, one no connection offers and one the policy
hides get one answer; two owners are a `NotOffered` naming both. Resource URIs
and templates are routed, compared and forwarded in their canonical form (`connections/_uris.py`).
Listings and reads are kept as the upstream's cache hints allow (`connections/pool/_offer_cache.py`), per
`viewer` (the peer's principal) for a private one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Literal

import anyio
import mcp_types as mt
from mcp import Client

from .._exceptions import ConnectionsError, NotOffered, TurnBuildError, TurnProblem, UpstreamError
from .._uris import canonical_uri, not_offered
from ..client._clients import OpenedClient
from ..client._listing_cache import DEFAULT_LISTING_TTL
from ..project._definitions import ConnectionDefinition
from ..project._pin_guard import PinGuard
from ..project._pins import PinKind
from ._offer_cache import OfferCache
from ._offer_calls import (
    STALE,
    Freshness,
    Listed,
    ListMethod,
    as_json,
    complete,
    freshness_of,
    get_prompt,
    list_every_page,
    read_resource,
    result_json,
)
from ._offer_match import NOT_FOUND, Holds, instance_of, keyed, matching
from ._offer_merge import Merged, merged
from ._pool import ClientPool

__all__ = ["Offerings"]

logger = logging.getLogger(__name__)

Kind = Literal["resources", "prompts"]

_PIN_KINDS: dict[ListMethod, PinKind] = {
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}


class Offerings:
    """Resources, templates and prompts of the advertised connections, for a server without sessions."""

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        pool: ClientPool,
        *,
        max_ttl: float = DEFAULT_LISTING_TTL,
        pins: PinGuard | None = None,
    ) -> None:
        self._pool = pool
        self._pins = pins
        self._cache = OfferCache(max_ttl)
        self._undeclared: set[tuple[str, Kind]] = set()  # warned once each (`_note_undeclared`)
        self.warn_undeclared = True
        """Log it when a connection's server does not offer a kind it advertises (`validate --online` reports
        it as a diagnostic instead, from `undeclared`)."""
        self._by_kind: dict[Kind, list[ConnectionDefinition]] = {"resources": [], "prompts": []}
        self.redefine(connections)

    def redefine(self, connections: Mapping[str, ConnectionDefinition]) -> None:
        """Advertise from `connections` (a reloaded project's; the pool redefined first)."""
        reachable = [
            d
            for _, d in sorted(connections.items())
            if d.auth is None and not d.host_only and d.kind != "account" and self._pool.serves(d.name)
        ]
        self._by_kind = {
            "resources": [d for d in reachable if d.advertise_resources is not False],
            "prompts": [d for d in reachable if d.advertise_prompts is not False],
        }

    def offers(self, kind: Kind) -> bool:
        """Whether any connection advertises `kind` (the server capabilities say so only then)."""
        return bool(self._by_kind[kind])

    async def undeclared(self) -> dict[str, list[Kind]]:
        """List every advertised connection's resources and prompts now; connection -> the kinds it
        advertises that its server does not offer (no such capability declared, or the method unknown).
        A connection that cannot be listed is left out (its listing's error is for the listings to tell)."""
        for kind in ("resources", "prompts"):
            await self._list_all(self._by_kind[kind], "prompts/list" if kind == "prompts" else "resources/list", None)
        return self.known_undeclared()

    def known_undeclared(self) -> dict[str, list[Kind]]:
        """What `undeclared` answers, from the listings made so far (no I/O: a connection not listed yet is
        not in it), for `GET /v1/info` on a running gateway."""
        found: dict[str, list[Kind]] = {}
        for name, kind in sorted(self._undeclared, key=lambda k: (k[0], k[1] == "prompts")):
            found.setdefault(name, []).append(kind)
        return found

    def invalidate(self, connection: str) -> None:
        """Forget what `connection` listed and answered (its upstream changed)."""
        self._cache.invalidate(connection)

    # -- listings ------------------------------------------------------------------------------------

    async def listing(self, method: ListMethod, viewer: str | None = None) -> Merged:
        """`method` across every advertised connection, merged. Raises `TurnBuildError` naming every
        connection that could not be listed and every collision (fail-closed)."""
        defns = self._by_kind["prompts" if method == "prompts/list" else "resources"]
        listings, problems = await self._list_all(defns, method, viewer)
        return merged(method, defns, listings, problems)

    async def _list_all(
        self, defns: list[ConnectionDefinition], method: ListMethod, viewer: str | None
    ) -> tuple[dict[str, Listed], list[TurnProblem]]:
        listings: dict[str, Listed] = {}
        problems: list[TurnProblem] = []

        async def one(defn: ConnectionDefinition) -> None:
            try:
                listings[defn.name] = await self._listed(defn, method, viewer)
            except ConnectionsError as exc:
                # The problem names the connection already, and the error says what failed.
                detail = getattr(exc, "detail", None) or str(exc).removeprefix(f"connection {defn.name!r}: ")
                problems.append(TurnProblem(exc.code, detail, connection=defn.name))

        async with anyio.create_task_group() as tg:
            for defn in defns:
                tg.start_soon(one, defn)
        return listings, problems

    async def _listed(self, defn: ConnectionDefinition, method: ListMethod, viewer: str | None) -> Listed:
        """One connection's listing of `method`, filtered by its lists, as JSON; from the cache when its hint allows."""
        cached = self._cache.get(defn.name, method, "", viewer)
        if cached is not None:
            return Listed(self._pinned(defn, method, cached[0]), cached[1])
        generation = self._cache.generation(defn.name)

        async def run(opened: OpenedClient) -> Listed:
            if not _declares(opened.client, "prompts" if method == "prompts/list" else "resources"):
                self._note_undeclared(defn, method)
                return Listed((), STALE)
            return await list_every_page(opened.client, method)

        try:
            listed = await self._pool.request(defn.name, method, run)
        except UpstreamError as exc:
            if exc.rpc_code != mt.METHOD_NOT_FOUND:
                raise
            # A server with resources but no templates, or one that knows no such method (its capabilities
            # unknown to a session pinned to 2026-07-28): none to offer.
            if method != "resources/templates/list":
                self._note_undeclared(defn, method)
            listed = Listed((), STALE)
        keep = _filter(defn, method)
        items = tuple(as_json(item) for item in listed.items if keep(item))
        self._cache.put(defn.name, method, "", viewer, items, listed.freshness, generation)
        return Listed(self._pinned(defn, method, items), listed.freshness)

    def _pinned(self, defn: ConnectionDefinition, method: ListMethod, items: tuple[Any, ...]) -> tuple[Any, ...]:
        """`items` less what `mcp.lock` holds back (a changed, new or renamed item: docs/connections.md)."""
        return items if self._pins is None else self._pins.offered(defn, _PIN_KINDS[method], items)

    async def _refuse_held(self, defn: ConnectionDefinition, method: ListMethod, key: str, viewer: str | None) -> None:
        """Raise `NotOffered` for an item the connection's latest `method` listing held back. With a lock
        and no checked listing held yet (a read before any listing), list it first: once, for later
        reads take the held verdict, so a held-back item is never served for want of a listing."""
        if self._pins is None or not self._pins.pins(defn):
            return
        kind = _PIN_KINDS[method]
        if (defn.name, kind) not in self._pins.held_offers:
            await self._listed(defn, method, viewer)
        held = self._pins.held_offers.get((defn.name, kind), {})
        if kind != "prompts":  # `key` is canonical; the lock names URIs as the upstream lists them
            held = {canonical_uri(k, template=kind == "resourceTemplates"): v for k, v in held.items()}
        if key in held:
            raise NotOffered(f"{key[:200]!r} is held back: {held[key]}")

    def _note_undeclared(self, defn: ConnectionDefinition, method: ListMethod) -> None:
        kind: Kind = "prompts" if method == "prompts/list" else "resources"
        if (defn.name, kind) in self._undeclared:
            return
        self._undeclared.add((defn.name, kind))
        if not self.warn_undeclared:
            return
        logger.warning(
            "connection %r: advertise_%s is set, but its server does not offer %s (it does not declare the "
            "capability, or answers that the method is unknown); it offers none "
            "(remove advertise_%s from its definition)",
            defn.name,
            kind,
            kind,
            kind,
        )

    # -- routed requests -----------------------------------------------------------------------------

    async def read(self, uri: str, viewer: str | None = None) -> tuple[dict[str, Any], Freshness]:
        """`resources/read` of `uri` on the connection that owns it: the result as JSON and its hint.
        Raises `NotOffered` (for an upstream's own "not found" too), and the pool's errors (an `UpstreamError`
        carries the upstream's own code). `uri` is read in its canonical form."""
        uri = canonical_uri(uri)
        defn = await self._owner_of_resource(uri, viewer, unlisted=True)
        await self._refuse_held(defn, "resources/list", uri, viewer)
        cached = self._cache.get(defn.name, "resources/read", uri, viewer)
        if cached is not None:
            return dict(cached[0]), cached[1]
        generation = self._cache.generation(defn.name)

        async def run(opened: OpenedClient) -> mt.ReadResourceResult:
            return await read_resource(opened.client, uri)

        try:
            result = await self._pool.request(defn.name, "resources/read", run)
        except UpstreamError as exc:
            if exc.rpc_code in NOT_FOUND:  # an instance of a template it does not have: as one nobody offers
                raise NotOffered(not_offered("resource", uri)) from None
            raise
        hint = freshness_of(result)
        body = result_json(result)
        self._cache.put(defn.name, "resources/read", uri, viewer, body, hint, generation)
        return dict(body), hint

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None, viewer: str | None = None
    ) -> dict[str, Any]:
        """`prompts/get` on the connection that owns prompt `name`, as JSON.
        Raises `NotOffered` and the pool's errors."""
        defn = await self._owner_of_prompt(name, viewer)
        await self._refuse_held(defn, "prompts/list", name, viewer)

        async def run(opened: OpenedClient) -> mt.GetPromptResult:
            return await get_prompt(opened.client, name, arguments)

        return result_json(await self._pool.request(defn.name, "prompts/get", run))

    async def complete(
        self,
        ref: mt.PromptReference | mt.ResourceTemplateReference,
        argument: Mapping[str, str],
        context: Mapping[str, str] | None,
        viewer: str | None = None,
    ) -> dict[str, Any]:
        """`completion/complete` on the connection that owns the prompt or template `ref` names, as JSON."""
        if isinstance(ref, mt.PromptReference):
            defn = await self._owner_of_prompt(ref.name, viewer)
        else:
            ref = mt.ResourceTemplateReference(type="ref/resource", uri=canonical_uri(ref.uri, template=True))
            defn = await self._owner_of_template(ref.uri, viewer)

        async def run(opened: OpenedClient) -> mt.CompleteResult:
            return await complete(opened.client, ref, argument, context)

        return result_json(await self._pool.request(defn.name, "completion/complete", run))

    async def owner_of_resource(self, uri: str, viewer: str | None = None) -> str:
        """The name of the advertised connection that offers resource `uri` (subscriptions route by it).
        Raises `NotOffered` and the listing's `TurnBuildError`."""
        return (await self._owner_of_resource(canonical_uri(uri), viewer)).name

    async def owner_of_prompt(self, name: str, viewer: str | None = None) -> str:
        """The name of the advertised connection that offers prompt `name`. Raises `NotOffered` (also for one
        `mcp.lock` holds back, saying why) and the listing's `TurnBuildError`."""
        return (await self._owner_of_prompt(name, viewer)).name

    async def templates_of(self, uri: str, viewer: str | None = None) -> list[str]:
        """The URI templates of the merged `resources/templates/list` that resource `uri` is an instance of
        (canonical forms): a read of it is decided against each of them too. Raises the listing's errors."""
        uri = canonical_uri(uri)
        merged = await self.listing("resources/templates/list", viewer)
        listed = (canonical_uri(str(item.get("uriTemplate")), template=True) for item in merged.items)
        return [t for t in listed if instance_of(t, uri)]

    async def _owner_of_prompt(self, name: str, viewer: str | None) -> ConnectionDefinition:
        candidates = [d for d in self._by_kind["prompts"] if d.allows_prompt(name)]
        return await self._owner("prompt", name, candidates, viewer, [("prompts/list", keyed(name))])

    async def _owner_of_resource(self, uri: str, viewer: str | None, *, unlisted: bool = False) -> ConnectionDefinition:
        """The connection that offers resource `uri`: the one whose listing holds it or a template of it. With
        `unlisted` (a read), the only connection whose lists allow it without asking for a listing (a server may
        serve a URI it lists nowhere, as a tool's resource link; its own "not found" is `not_offered` in `read`)."""
        candidates = [d for d in self._by_kind["resources"] if d.allows_resource(uri)]
        if unlisted and len(candidates) == 1:
            return candidates[0]
        return await self._owner(
            "resource",
            uri,
            candidates,
            viewer,
            [("resources/list", keyed(uri)), ("resources/templates/list", matching(uri))],
        )

    async def _owner_of_template(self, template: str, viewer: str | None) -> ConnectionDefinition:
        template = canonical_uri(template, template=True)
        candidates = [
            d for d in self._by_kind["resources"] if d.allows_template(template) or d.allows_resource(template)
        ]
        return await self._owner(
            "resource template",
            template,
            candidates,
            viewer,
            [("resources/templates/list", keyed(template)), ("resources/list", keyed(template))],
        )

    async def _owner(
        self,
        kind: str,
        key: str,
        candidates: list[ConnectionDefinition],
        viewer: str | None,
        tests: list[tuple[ListMethod, Holds]],
    ) -> ConnectionDefinition:
        """The one candidate whose listing holds the `kind` named `key` (by the first of `tests` that finds any).
        Raises `NotOffered`: `not_offered`'s sentence when none does, unless `mcp.lock` holds it back (its own)."""
        for method, holds in tests:
            if not candidates:
                break
            listings, problems = await self._list_all(candidates, method, viewer)
            if problems:
                raise TurnBuildError(problems)
            owners = [d for d in candidates if any(holds(method, item) for item in listings[d.name].items)]
            if len(owners) > 1:
                names = " and ".join(repr(d.name) for d in owners)
                raise NotOffered(f"{kind} {key[:200]!r} is offered by both connections {names}; deny it on one of them")
            if owners:
                return owners[0]
        for defn in candidates:
            await self._refuse_held(defn, tests[0][0], key, viewer)
        raise NotOffered(not_offered(kind, key))


def _declares(client: Client, kind: Kind) -> bool:
    """Whether the upstream of `client` declares the `kind` capability. A server that does not (a tools-only
    server such as mcp-server-time) has nothing to list, and asking would be an error answer (-32601) that
    fails every merged listing. True when the session knows no capabilities at all (a client pinned to
    2026-07-28 skips `server/discover`): then only asking tells."""
    caps = client.server_capabilities
    if caps.tools is None and caps.resources is None and caps.prompts is None:
        return True
    return (caps.prompts if kind == "prompts" else caps.resources) is not None


def _filter(defn: ConnectionDefinition, method: ListMethod) -> Callable[[Any], bool]:
    if method == "resources/list":
        return lambda item: defn.allows_resource(item.uri)
    if method == "resources/templates/list":
        return lambda item: defn.allows_template(item.uri_template)
    return lambda item: defn.allows_prompt(item.name)
