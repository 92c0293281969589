"""`Broker`: a loaded project made live — the client pool and the account connections side by side,
`host.mcp` routing between them, and the turn builder."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx2
import mcp_types as mt

from oauth import ConnectionAuth, LoginRequired, TokenStore, connection_auth

from ..account._account import AccountConnections
from ..client._listing_cache import DEFAULT_LISTING_TTL
from ..client._passthrough import UpstreamResult
from ..client._sandbox import hide_from_sandboxes
from ..client._upstream_changes import Change
from ..host._host import HostMcp
from ..pool._caller_auth import CallerCredentials, CallerOnly, by_caller
from ..pool._identity_pool import IdentityPool
from ..pool._offerings import Offerings
from ..pool._pool import ClientPool
from ..pool._principal_grants import PrincipalCalls, partition_of
from ..project._definitions import ConnectionDefinition
from ..project._loader import Project
from ..project._pin_guard import PinGuard
from ..turns._turns import TurnBuilder

__all__ = ["Broker", "Host"]


@dataclass(frozen=True, slots=True)
class Host:
    """What authored tools receive as `ctx.host`: `host.mcp` (static headers only)."""

    mcp: HostMcp


class Broker:
    """Owns everything that talks to upstreams for one project.

    `async with Broker(project) as broker:` then `await broker.builder.build(session)` for a turn,
    `broker.host.mcp` for agent code. Leaving the block closes every client and stdio child.

    Connections with `oauth` get their `Authorization` from `token_store` (tokens written by
    `agent-sdk mcp oauth`); without a store such a connection fails with a sentence saying so.
    Per-session `auth` connections are pooled per identity (`IdentityPool`: a client per distinct set
    of headers the callback returns, never used for another's call); `session_ended(id)` releases what a
    session held. `child_env` is added to the environment of the
    stdio children that opt in with `bridge=True` (the gateway hands its account bridge's URL
    and secret down this way). `fast_calls=False` keeps pooled calls on the SDK's HTTP transport
    (docs/clients.md). At most `start_limit` stdio children start at once (default: the number of
    cores); `warm()` starts them all now. A sandboxed stdio child never sees `sandbox_hidden` (the gateway's
    state root and key file) nor another connection's writable grants (`Sandbox.hidden`).
    """

    def __init__(
        self,
        project: Project,
        *,
        environ: Mapping[str, str] | None = None,
        token_store: TokenStore | None = None,
        listing_ttl: float = DEFAULT_LISTING_TTL,
        child_env: Mapping[str, str] | None = None,
        fast_calls: bool = True,
        start_limit: int | None = None,
        sandbox_hidden: Iterable[str] = (),
    ) -> None:
        self._sandbox_hidden = tuple(sandbox_hidden)
        project.connections.update(hide_from_sandboxes(project.connections, self._sandbox_hidden))
        self.project = project
        self.environ: Mapping[str, str] = dict(os.environ) if environ is None else dict(environ)
        self._store = token_store
        self._oauth_http: httpx2.AsyncClient | None = None
        self._auths: dict[str, ConnectionAuth] = {}
        self._grants: dict[tuple[str, str], ConnectionAuth] = {}
        """`grants="per_principal"`: one `ConnectionAuth` per (connection, principal), for the broker's life."""
        self._callers: CallerCredentials | None = None
        pooled = {name: d for name, d in project.connections.items() if d.kind != "account"}
        self.identities = IdentityPool(
            {
                name: d
                for name, d in pooled.items()
                if d.auth is not None or d.upstream_sessions == "per_principal" or by_caller(d)
            },
            environ=self.environ,
            listing_ttl=listing_ttl,
            fast_calls=fast_calls,
            auth_for=self._auth_for,
            child_env=child_env,
            start_limit=start_limit,
            grant_auth_for=self._grant_auth,
        )
        self.pool = ClientPool(
            pooled,
            environ=self.environ,
            auth_for=self._auth_for,
            listing_ttl=listing_ttl,
            child_env=child_env,
            fast_calls=fast_calls,
            start_limit=start_limit,
        )
        # Account connections forward to hub connectors through a pool of their own (docs/accounts.md).
        self.accounts = AccountConnections(
            {name: d for name, d in project.connections.items() if d.kind == "account"},
            environ=self.environ,
            listing_ttl=listing_ttl,
            fast_calls=fast_calls,
        )
        self.pins = PinGuard.for_project(project.root)
        """The advertised listings checked against the project's `mcp.lock` (docs/connections.md)."""
        self.offerings = Offerings(project.connections, self.pool, max_ttl=listing_ttl, pins=self.pins)
        """The advertised resources, templates and prompts, merged and routed (`/v1/mcp/tools`)."""
        # An upstream that says its resources or prompts changed (or one resource did) is listed anew.
        self.pool.listing_cache.watch(self._offerings_changed)
        self._stack = AsyncExitStack()
        self.host = Host(mcp=HostMcp(self.pool, self.accounts, PrincipalCalls(self.identities, pooled)))
        self.builder = TurnBuilder(
            project,
            list_tools=self._list_tools,
            call_tool=self._call_tool,
            host=self.host,
            starting=self._starting,
            pins=self.pins,
        )

    def _offerings_changed(self, name: str, change: Change) -> None:
        if change.kind != "tools":
            self.offerings.invalidate(name)

    async def __aenter__(self) -> Broker:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self.pool)
            await stack.enter_async_context(self.identities)
            await stack.enter_async_context(self.accounts)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every pooled client (terminating stdio children), the account connections and the OAuth HTTP client."""
        try:
            await self._stack.aclose()
        finally:
            if self._oauth_http is not None:
                await self._oauth_http.aclose()

    def redefine(self, project: Project) -> list[str]:
        """Serve a reloaded `project`'s definitions (`serve`'s reload, docs/connections.md#reloading): the
        project this broker was made with takes the new connections and tools in place (everything that
        reads them sees the new ones), a connection whose definition did not change keeps its pooled client,
        a changed or removed one is closed (a stdio child stopped). Returns the names closed.

        Raises `ValueError` (and changes nothing) when the reload adds, removes or changes a connection whose
        clients are kept per identity, per principal or per account: those are read once, at start."""
        # The same hiding as at start: a reloaded sandbox never sees more, and an unchanged one compares equal.
        new = {**project.connections, **hide_from_sandboxes(project.connections, self._sandbox_hidden)}
        old = self.project.connections
        fixed = sorted(
            name
            for name in set(old) | set(new)
            if old.get(name) != new.get(name) and (_per_identity(old.get(name)) or _per_identity(new.get(name)))
        )
        if fixed:
            raise ValueError(
                f"connection(s) {', '.join(fixed)} keep clients per session, principal or account, which are "
                "set up once: restart serve to change them"
            )
        kept = {name: old[name] if _per_identity(old.get(name)) else d for name, d in new.items()}
        closed = self.pool.redefine({name: d for name, d in kept.items() if d.kind != "account"})
        self.project.connections.clear()
        self.project.connections.update(kept)
        self.project.tools.clear()
        self.project.tools.update(project.tools)
        self.project.extensions.clear()
        self.project.extensions.update(project.extensions)
        self.project.diagnostics[:] = project.diagnostics
        self.offerings.redefine(self.project.connections)
        for name in closed:
            self.offerings.invalidate(name)
        return closed

    def oauth_refreshes(self) -> dict[str, int]:
        """Refresh-token grants spent so far, by connection, principals' own grants included (for the metrics)."""
        return self._summed(lambda auth: auth.stats.refreshes)

    def forget_tokens(self, name: str, principal: str | None = None) -> None:
        """After a logout: `name`'s OAuth auth drops the grant it holds in memory (no-op without one); with
        `principal`, that principal's own grant only."""
        auth = self._auths.get(name) if principal is None else self._grants.get((name, principal))
        if auth is not None:
            auth.forget()

    def oauth_refresh_failures(self) -> dict[str, int]:
        """Refreshes that failed so far, by connection, principals' own grants included (for the metrics)."""
        return self._summed(lambda auth: auth.stats.refresh_failures)

    def _summed(self, count: Callable[[ConnectionAuth], int]) -> dict[str, int]:
        totals = {name: count(auth) for name, auth in self._auths.items()}
        for (name, _principal), auth in self._grants.items():
            totals[name] = totals.get(name, 0) + count(auth)
        return totals

    def _auth_for(self, defn: ConnectionDefinition) -> httpx2.Auth | None:
        if defn.oauth is not None and by_caller(defn):
            return CallerOnly(defn.name, defn.oauth.grant)  # its calls go as their callers (`_as_caller`)
        if defn.oauth is None or defn.url is None or self._store is None:
            return None
        if defn.grants == "per_principal":
            return _NO_SHARED_GRANT  # the shared pool never calls it with a grant, not even the gateway's
        auth = self._auths.get(defn.name)
        if auth is None:
            if self._oauth_http is None:
                self._oauth_http = httpx2.AsyncClient(timeout=30.0)
            # One ConnectionAuth per connection for the broker's life: its lock and cached token
            # survive a pooled client reopening, so a refresh is never run twice in this process.
            auth = connection_auth(defn.name, defn.url, defn.oauth, self._store, http=self._oauth_http)
            self._auths[defn.name] = auth
        return auth

    def _grant_auth(self, defn: ConnectionDefinition, principal: str) -> httpx2.Auth | None:
        """`principal`'s own grant of the `grants="per_principal"` connection `defn` (docs/oauth.md#per-user-grants)."""
        if defn.oauth is None or defn.url is None or self._store is None:
            return None
        auth = self._grants.get((defn.name, principal))
        if auth is None:
            if self._oauth_http is None:
                self._oauth_http = httpx2.AsyncClient(timeout=30.0)
            auth = connection_auth(
                defn.name, defn.url, defn.oauth, self._store, http=self._oauth_http, principal=principal
            )
            self._grants[(defn.name, principal)] = auth
        return auth

    def warm(self) -> None:
        """Start every pooled connection now, in the background (`serve --warm`): the first peer does not wait."""
        self.pool.warm()

    def _starting(self, defn: ConnectionDefinition) -> bool:
        return self.pool.serves(defn.name) and self.pool.status(defn.name).state in ("queued", "opening")

    def session_ended(self, session_id: str) -> None:
        """Close the `auth` connections' clients that only session `session_id` held (docs/clients.md)."""
        self.identities.session_ended(session_id)

    def account_connectors(self, name: str) -> tuple[str, ...] | None:
        """The hub connectors account connection `name` last resolved to (None before its first use)."""
        return self.accounts.resolved(name)

    def _caller_credentials(self) -> CallerCredentials:
        if self._callers is None:
            if self._oauth_http is None:
                self._oauth_http = httpx2.AsyncClient(timeout=30.0)
            self._callers = CallerCredentials(self._oauth_http)
        return self._callers

    async def _list_as_caller(self, defn: ConnectionDefinition) -> list[mt.Tool]:
        headers = await self._caller_credentials().headers(defn)
        return await self.identities.list_identity_tools(defn.name, headers, use_cache=True)

    async def _call_as_caller(
        self, defn: ConnectionDefinition, tool: str, arguments: Mapping[str, Any]
    ) -> dict[str, Any]:
        headers = await self._caller_credentials().headers(defn)
        return await self.identities.call_identity_tool(defn.name, tool, arguments, headers)

    async def _list_tools(self, defn: ConnectionDefinition, headers: Mapping[str, str] | None) -> list[mt.Tool]:
        if headers is None and by_caller(defn):
            return await self._list_as_caller(defn)  # docs/oauth.md: token exchange, ID-JAG
        if headers is None:
            if defn.grants == "per_principal":  # each principal lists with its own grant
                return await self.identities.list_identity_tools(defn.name, partition_of(defn), use_cache=True)
            return await self.host.mcp.list_tools(defn.name, use_cache=True)
        return await self.identities.list_identity_tools(defn.name, headers, use_cache=True)

    def _call_tool(
        self, defn: ConnectionDefinition, tool: str, arguments: Mapping[str, Any], headers: Mapping[str, str] | None
    ) -> Awaitable[dict[str, Any] | UpstreamResult]:
        # The coroutine itself, not awaited here: one frame fewer on every pooled call. The result
        # stays JSON whichever side serves the connection (`host.mcp` is where it becomes a model); the
        # shared pool's keeps its bytes, for a forwarding peer's answer (`client/_passthrough.py`).
        if headers is None:
            if defn.kind == "account":
                return self.accounts.call_tool(defn.name, tool, arguments)
            if by_caller(defn):
                return self._call_as_caller(defn, tool, arguments)
            if defn.upstream_sessions == "per_principal":
                return self.identities.call_identity_tool(defn.name, tool, arguments, partition_of(defn))
            return self.pool.call_tool_upstream(defn.name, tool, arguments)
        return self.identities.call_identity_tool(defn.name, tool, arguments, headers)


class _NoSharedGrant(httpx2.Auth):
    """The shared pool's auth for a `grants="per_principal"` connection: refuses every request (fail closed)."""

    def sync_auth_flow(self, request: httpx2.Request) -> Any:
        raise LoginRequired("calls of a grants='per_principal' connection must name their principal")

    async def async_auth_flow(self, request: httpx2.Request) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        raise LoginRequired(
            "this connection has grants='per_principal': each call uses its caller's own grant, and this one "
            "names no caller; call it through the gateway (or inside connections.acting_for(principal_id))"
        )
        yield request  # pragma: no cover - an async generator that never sends


_NO_SHARED_GRANT = _NoSharedGrant()


def _per_identity(defn: ConnectionDefinition | None) -> bool:
    """A connection whose clients the identity pool, the principals' grants or the account connections keep."""
    return defn is not None and (
        defn.kind == "account"
        or defn.auth is not None
        or defn.upstream_sessions == "per_principal"
        or defn.grants == "per_principal"
        or by_caller(defn)
    )
