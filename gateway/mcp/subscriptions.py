"""Subscriptions on `/v1/mcp/tools`: what upstreams say changed, relayed to the peers that listen.

Every change an upstream announces reaches the pool's `ListingCache` (`connections/client/_upstream_changes.py`:
handshake-era notifications, or the `subscriptions/listen` stream the pool holds on a 2026-07-28
upstream). `Subscriptions.watching` turns each one into a `ServerEvent` on a bus (`tools`, `resources`,
`prompts` list changes of the connections whose items this endpoint shows; `resources/updated` of a
resource); the `Broker` drops the connection's cached resources and prompts itself (`Offerings.invalidate`).

- **2026-07-28 peers** send `subscriptions/listen` (SEP-2575): the SDK's `ListenHandler` acknowledges
  and streams the matching events on the POST's SSE answer until the peer goes away. For each
  resource URI in the filter, the gateway subscribes the owning connection's pooled session
  (`resources/subscribe`, handshake-era upstreams that declare `resources.subscribe`) while at least
  one stream on this replica wants it, and unsubscribes after the last one ends.
- **Handshake-era peers** send `resources/subscribe` / `resources/unsubscribe` with the sealed
  `Mcp-Session-Id` of their `initialize`, and read the same events on their session's GET stream
  (`gateway/mcp/peers/streams.py`: the second front door of this one relay).

Streams and the upstream subscriptions they hold live on the replica that serves the stream (as a
stdio child does): nothing is shared and nothing outlives the stream.

Streams are capped per principal (`gateway/mcp/peers/caps.py`): `Subscriptions.streams` is the one budget of
listen streams and handshake-era sessions, and a listen filter names at most `MAX_URIS` resources.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from connections import ConnectionDefinition, ConnectionsError, HostMcp, NotOffered
from connections.serving import Change, ListingCache, Offerings, canonical_uri, not_offered

from ..policy import PolicyGate, caller_of, hidden, resource_target
from .peers.caps import MAX_STREAMS, MAX_URIS, AtCap, PerPrincipal

__all__ = ["Subscriptions", "subscription_handlers", "viewer"]

logger = logging.getLogger("agent_sdk.mcp")


class _Bus:
    """A `SubscriptionBus` that can also publish from synchronous code (the pool's change watchers)."""

    def __init__(self) -> None:
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}

    def publish_now(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:  # fan-out boundary: one stream's fault must not starve the others
                logger.exception("a subscription listener raised")

    async def publish(self, event: ServerEvent) -> None:
        self.publish_now(event)
        await anyio.lowlevel.checkpoint()

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe


def _event(change: Change) -> ServerEvent:
    if change.kind == "tools":
        return ToolsListChanged()
    if change.kind == "resources":
        return ResourcesListChanged()
    if change.kind == "prompts":
        return PromptsListChanged()
    return ResourceUpdated(uri=canonical_uri(change.uri or ""))  # as the peers subscribed it


class Subscriptions:
    """The bus, the listen handler and the upstream resource subscriptions of one gateway process."""

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        host: HostMcp | None,
        offerings: Offerings | None,
        *,
        max_streams: int = MAX_STREAMS,
    ) -> None:
        self._host = host
        self.streams = PerPrincipal(max_streams, _too_many_streams)
        """Each principal's open streams, of both generations (`principal_caps.stream_cap`)."""
        self._offerings = offerings
        shown = [d for d in connections.values() if d.auth is None and not d.host_only and d.kind != "account"]
        self._tools = {d.name for d in shown if d.advertise_tools}
        self._offers = {d.name for d in shown if d.advertise_resources is not False or d.advertise_prompts is not False}
        self.bus = _Bus()
        self.listen = ListenHandler(self.bus)
        self._held: Counter[tuple[str, str]] = Counter()
        self._lock = anyio.Lock()

    def changed(self, connection: str, change: Change) -> None:
        """An upstream announced `change` (a `ListingCache.watch` callback)."""
        shown = self._tools if change.kind == "tools" else self._offers
        if connection in shown:
            self.bus.publish_now(_event(change))

    def watching(self, cache: ListingCache, stack: AsyncExitStack) -> Subscriptions:
        """Follow `cache`'s changes until `stack` closes."""
        stack.callback(cache.watch(self.changed))
        return self

    async def owner(self, uri: str, viewer: str) -> str:
        """The advertised connection that offers resource `uri`. Raises `MCPError` (-32602) otherwise."""
        if self._offerings is None:
            raise MCPError(mt.INVALID_PARAMS, not_offered("resource", canonical_uri(uri)))
        try:
            return await self._offerings.owner_of_resource(uri, viewer)
        except NotOffered as exc:
            raise MCPError(mt.INVALID_PARAMS, str(exc)) from None

    async def refuse_hidden(self, policy: PolicyGate, ctx: ServerRequestContext[Any, Any], uris: list[str]) -> None:
        """Raise, as `owner` does for a URI no connection offers, for one the policy hides from the peer: each
        decided in its canonical form (`resource_target`), and on every template it is an instance of."""
        caller = caller_of(getattr(ctx.request, "scope", None))
        for uri in uris:
            templates: list[str] = []
            if policy.enforcing and self._offerings is not None:
                try:
                    templates = await self._offerings.templates_of(uri, viewer(ctx))
                except ConnectionsError as exc:  # the template listing failed closed
                    raise MCPError(mt.INTERNAL_ERROR, f"{exc.code}: {exc}", data={"error": exc.code}) from None
            of = [resource_target(t, template=True) for t in templates]
            refusal = hidden(policy, caller, "resources/subscribe", resource_target(uri), *of)
            if refusal is not None:
                raise MCPError(mt.INVALID_PARAMS, str(refusal))

    async def hold(self, uris: list[str], viewer: str, stack: AsyncExitStack) -> None:
        """Keep each of `uris` subscribed at its owning upstream until `stack` closes (counted per replica), in
        its canonical form (`canonical_uri`)."""
        for uri in map(canonical_uri, uris):
            connection = await self.owner(uri, viewer)
            key = (connection, uri)
            async with self._lock:
                self._held[key] += 1
                if self._held[key] == 1:
                    await self._upstream("resources/subscribe", connection, uri)
            stack.push_async_callback(self._release, key)

    async def _release(self, key: tuple[str, str]) -> None:
        with anyio.CancelScope(shield=True):  # a peer that went away still lets go of its upstream subscription
            async with self._lock:
                self._held[key] -= 1
                if self._held[key] <= 0:
                    del self._held[key]
                    await self._upstream("resources/unsubscribe", key[0], key[1])

    async def _upstream(self, method: str, connection: str, uri: str) -> None:
        """`method` for `uri` on the connection's pooled session; a failure is logged, never raised (the
        listen stream still carries list changes; the upstream's updates for `uri` just do not come)."""
        if self._host is None:
            return
        try:
            await self._host.resource_subscription(connection, uri, subscribe=method == "resources/subscribe")
        except (ConnectionsError, ValueError) as exc:
            logger.warning(
                "connection %r: %s failed (%s)", connection, method, getattr(exc, "code", type(exc).__name__)
            )


def _too_many_streams(limit: int) -> str:
    return (
        f"this caller already holds {limit} streams on this gateway (subscriptions/listen streams, and "
        "handshake-era sessions with a GET stream or subscriptions); close one (end a listen stream, or DELETE "
        "/v1/mcp/tools with its Mcp-Session-Id) and retry"
    )


RuntimeFor = Callable[[ServerRequestContext[Any, Any]], Any]


def subscription_handlers(runtime_for: RuntimeFor) -> dict[str, Any]:
    """The `Server(...)` handler argument of `subscriptions/listen` (the handshake era's `resources/subscribe`
    and `resources/unsubscribe`: `peer_streams.subscribe_handlers`)."""

    async def listen(ctx: ServerRequestContext[Any, Any], params: mt.SubscriptionsListenRequestParams) -> Any:
        subscriptions = runtime_for(ctx).subscriptions
        if subscriptions is None:  # the server was built with the handler, so the runtime has them
            raise MCPError(mt.INTERNAL_ERROR, "subscriptions are not set up on this gateway")
        uris = [canonical_uri(u) for u in params.notifications.resource_subscriptions or ()]
        if uris:  # the filter in canonical form: decided, held upstream and matched against updates as one
            wanted = params.notifications.model_copy(update={"resource_subscriptions": uris})
            params = params.model_copy(update={"notifications": wanted})
        if len(uris) > MAX_URIS:
            raise AtCap(
                f"subscriptions/listen refused: the filter names {len(uris)} resources and one stream follows at "
                f"most {MAX_URIS}; split them over several streams"
            )
        principal = viewer(ctx)
        await subscriptions.refuse_hidden(runtime_for(ctx).policy, ctx, uris)  # as a resource no connection offers
        async with AsyncExitStack() as stack:
            stack.enter_context(subscriptions.streams.holding(principal))
            await subscriptions.hold(uris, principal, stack)
            return await subscriptions.listen(ctx, params)

    return {"on_subscriptions_listen": listen}


def viewer(ctx: ServerRequestContext[Any, Any]) -> str:
    """The peer's principal (as `mcp_call_stream.principal_id` reads it; that module sits above `runtime`)."""
    scope: Any = getattr(ctx.request, "scope", None) or {}  # no scope on `serve --stdio`
    return getattr(scope.get("state", {}).get("principal"), "id", None) or "anonymous"
