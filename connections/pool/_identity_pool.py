"""`IdentityPool`: pooled upstream clients for connections with a per-session `auth` callback, one per identity.

It also keeps the principals of `upstream_sessions="per_principal"` connections: each principal is an
identity with no headers of its own (`principal_partition`), whose client opens with the connection's
own headers and OAuth and is never shared, whatever the generation; the bounds below apply alike.

An identity is the set of headers a session's callback returned; clients are keyed by (connection, digest
of those headers) (`client/_identity.py`), the digest all a log line shows of one. Per generation:

- a handshake-era upstream (`initialize`, an `Mcp-Session-Id`) gets one upstream session per
  identity, opened with that identity's headers and only ever used for its calls: a server may
  bind a session to the principal that opened it;
- a 2026-07-28 upstream has no session to bind: one client per connection serves every identity,
  each request carrying its caller's headers (`IdentityAuth.share()`), on the fast wire's one
  keep-alive HTTP pool. The first open of a connection tells which generation it is; a connection
  whose fast wire is off (`serve --no-fast-calls`, a proxy, a redirecting upstream) keeps one
  client per identity.

Bounds, per connection: at most `max_identities` identities are kept (the least recently used idle
one is closed to make room; one in use is never closed under its caller), an identity unused for
`identity_idle_timeout` seconds is closed, a session whose callback now returns other headers
(rotation) releases its old identity, and `session_ended(id)` releases a session's; an identity no
session holds any more is closed. Listings are cached per identity (the pool's `listing_ttl`).

Every operation reuses `ClientPool`'s (timeouts, one retry on a forgotten session, errors typed,
failures judged per cause): an identity's failures count against its own client only, so one
tenant's 401 never pauses another's. See docs/clients.md#per-session-auth-one-client-per-identity.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import Token
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import httpx2
import mcp_types as mt
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._exceptions import ConnectionsError, ConnectionUnavailable, UnknownConnection, UnknownTool
from ..client._clients import OpenedClient, list_all_tools
from ..client._identity import IdentityAuth, speak_as, speaking_as, stop_speaking
from ..client._listing_cache import DEFAULT_LISTING_TTL, ListingCache
from ..client._passthrough import UpstreamResult
from ..client._restart import RestartPolicy, RestartState
from ..client._session_runner import OpenSettings, PooledSession, SessionSlot
from ..client._tool_results import call_upstream_tool
from ..client._wire import SdkWire
from ..project._definitions import ConnectionDefinition
from ._caller_auth import by_caller
from ._identity_book import Identity, IdentityBook, IdentityCounts
from ._pool import AuthFor, ClientPool

__all__ = ["GrantAuthFor", "IdentityCounts", "IdentityPool"]

GrantAuthFor = Callable[[ConnectionDefinition, str], "httpx2.Auth | None"]
"""A `grants="per_principal"` connection's auth for one principal's own grant."""

logger = logging.getLogger(__name__)

_SWEEP_MAX = 30.0
"""The longest pause between two sweeps for idle identities."""


class _Slot(SessionSlot):
    """A `SessionSlot` that opens with its own settings (its identity's `IdentityAuth`) and listings."""

    def __init__(
        self, defn: ConnectionDefinition, restarts: RestartState, settings: OpenSettings, listings: ListingCache
    ) -> None:
        super().__init__(defn, restarts)
        self.settings = settings
        self.listings = listings
        self.auth: IdentityAuth | None = None


class _Forget(ListingCache):
    """What a slot invalidates when its session opens, ends or says `list_changed`: the listings it served."""

    def __init__(self, forget: Any) -> None:
        super().__init__(0)
        self._forget = forget

    def invalidate(self, name: str) -> None:
        self._forget()


@dataclass(slots=True)
class _Connection:
    defn: ConnectionDefinition
    book: IdentityBook
    shared: _Slot | None = None
    learned: bool = False
    """An open succeeded: the upstream's generation is known (`shared` set, or one client per identity)."""
    unshareable: bool = False
    """The shared client's fast wire went off (a redirecting upstream): one client per identity for good."""
    learning: anyio.Lock = field(default_factory=anyio.Lock)
    """Held by the first open: concurrent first uses of a 2026-07-28 upstream wait for its shared client."""


class IdentityPool(ClientPool):
    """Clients for `auth` connections, keyed by identity; use as `async with IdentityPool(...)`.

    `list_tools(name, headers)` and `call_tool(name, tool, args, headers)` take the headers the
    session's callback returned (a `SessionHeaders`, or any mapping); `session_ended(id)` closes the
    identities only that session held.
    """

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        *,
        environ: Mapping[str, str] | None = None,
        listing_ttl: float = DEFAULT_LISTING_TTL,
        restart_policy: RestartPolicy | None = None,
        fast_calls: bool = True,
        auth_for: AuthFor | None = None,
        child_env: Mapping[str, str] | None = None,
        start_limit: int | None = None,
        grant_auth_for: GrantAuthFor | None = None,
    ) -> None:
        super().__init__(
            {},
            environ=environ,
            auth_for=auth_for,
            listing_ttl=listing_ttl,
            restart_policy=restart_policy,
            child_env=child_env,
            fast_calls=fast_calls,
            start_limit=start_limit,
        )
        self._conns = {
            d.name: _Connection(d, IdentityBook(d.name, d.max_identities, d.identity_idle_timeout, self._retire))
            for d in connections.values()
            if d.auth is not None or d.upstream_sessions == "per_principal" or by_caller(d)
        }
        self._grant_auth_for = grant_auth_for

    async def __aenter__(self) -> IdentityPool:
        await super().__aenter__()
        if self._conns and self._tg is not None:
            self._tg.start_soon(self._sweeper, name="mcp-identities:sweep")
        return self

    def names(self) -> list[str]:
        """The `auth` connections' names, sorted."""
        return sorted(self._conns)

    def identity_counts(self, name: str) -> IdentityCounts:
        """How many identities `name` keeps now, has opened and has closed. Raises `UnknownConnection`."""
        book = self._conn(name).book
        return IdentityCounts(len(book.identities), book.opened, book.closed, self._conn(name).shared is not None)

    async def list_identity_tools(
        self, name: str, headers: Mapping[str, str], *, use_cache: bool = False
    ) -> list[mt.Tool]:
        """`tools/list` (all pages, allow/deny applied) as the identity `headers`, from its cached listing when
        `use_cache` and fresh. Raises what `ClientPool.list_tools` raises."""
        conn = self._conn(name)
        entry = conn.book.enter(headers)
        try:
            if use_cache:
                cached = self._cache.get(entry.key)
                if cached is not None:
                    return cached
            generation = 0

            async def run(opened: OpenedClient) -> list[mt.Tool]:
                nonlocal generation
                generation = self._cache.generation(entry.key)
                return await list_all_tools(conn.defn, opened.client)

            token = speak_as(headers)
            try:
                slot = await self._slot_for(conn, entry, headers)
                tools = await self._operate(slot, "list", run, conn.defn.timeouts.list)
            finally:
                stop_speaking(token)
            self._cache.put(entry.key, tools, generation)
            return tools
        finally:
            conn.book.leave(entry)

    async def call_identity_tool(
        self, name: str, tool: str, arguments: Mapping[str, Any] | None, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """`tools/call` as the identity `headers`; the result as JSON. Raises what `ClientPool.call_tool` raises."""
        conn = self._conn(name)
        entry = conn.book.enter(headers)
        token: Token[Mapping[str, str] | None] | None = None
        try:
            token = speak_as(headers)  # a context variable, not a `with`: this is every call's path
            slot = self._shared_now(conn) if conn.learned else None  # the hot path: no await
            if slot is None:
                slot = await self._slot_for(conn, entry, headers)
            args = self._call_arguments(slot, tool, arguments)

            def run(opened: OpenedClient) -> Awaitable[UpstreamResult]:
                wire = opened.wire or SdkWire(opened.client.session)
                return call_upstream_tool(opened.client, wire, tool, args, conn.defn.min_log_level)

            result = (await self._operate(slot, "call", run, conn.defn.timeouts.call, tool=tool)).result
            if result.get("isError") and await self._lacks_tool(name, tool):
                raise UnknownTool(name, tool)  # as `ClientPool.call_tool`: this identity's listing lacks it
            return result
        finally:
            if token is not None:
                stop_speaking(token)
            conn.book.leave(entry)

    def session_ended(self, session_id: str) -> None:
        """Release what session `session_id` held: an identity no other session holds (and no call uses) closes."""
        for conn in self._conns.values():
            conn.book.release(session_id)

    # -- internals --------------------------------------------------------------------------

    def _conn(self, name: str) -> _Connection:
        conn = self._conns.get(name)
        if conn is None:
            known = ", ".join(sorted(self._conns)) or "none"
            raise UnknownConnection(name, f"no connection with per-session auth by that name (defined: {known})")
        return conn

    async def _slot_for(self, conn: _Connection, entry: Identity, headers: Mapping[str, str]) -> _Slot:
        if not conn.learned:
            async with conn.learning:  # the first open tells the generation; the others wait for it
                if not conn.learned:
                    slot = self._pick(conn, entry, headers)
                    await self._acquire_identity(slot)
                    conn.learned = True
        return self._pick(conn, entry, headers)

    def _pick(self, conn: _Connection, entry: Identity, headers: Mapping[str, str]) -> _Slot:
        shared = self._shared_now(conn)
        if shared is not None:
            return shared
        if entry.client is None:
            own = conn.defn.auth is not None or by_caller(
                conn.defn
            )  # headers of its own: a callback's, a caller's token
            entry.client = self._new_slot(
                conn, entry, IdentityAuth(headers) if own else None, getattr(headers, "principal", None)
            )
        slot: _Slot = entry.client
        return slot

    def _new_slot(
        self, conn: _Connection, entry: Identity, auth: IdentityAuth | None, principal: str | None = None
    ) -> _Slot:
        """A client of `entry` alone: with `auth`, its headers on every request; without (a principal of a
        `per_principal` connection), the connection's own (static headers, OAuth), never shared; and for a
        `grants="per_principal"` connection, that principal's own grant (`grant_auth_for`)."""
        key = entry.key

        def forget() -> None:
            self._cache.invalidate(key)

        def auth_for(_defn: ConnectionDefinition) -> IdentityAuth | None:
            return auth

        settings = self._settings if auth is None else replace(self._settings, auth_for=auth_for, headers_per_call=True)
        if auth is None and conn.defn.grants == "per_principal":
            grant = self._grant_auth_for(conn.defn, principal) if self._grant_auth_for and principal else None
            if grant is None:  # never the shared grant: this principal's own, or none at all
                raise ConnectionUnavailable(conn.defn.name, "grants='per_principal' and no principal's grant to use")

            def own_grant(_defn: ConnectionDefinition) -> httpx2.Auth:
                return grant

            settings = replace(self._settings, auth_for=own_grant)
        slot = _Slot(conn.defn, RestartState(self._policy), settings, _Forget(forget))
        slot.auth = auth
        self._slots[key] = slot
        return slot

    def _acquire(self, slot: SessionSlot) -> Awaitable[tuple[PooledSession, OpenedClient]]:
        assert isinstance(slot, _Slot)
        return self._acquire_identity(slot)

    async def _acquire_identity(self, slot: _Slot) -> tuple[PooledSession, OpenedClient]:
        if self._closed or self._tg is None:
            raise ConnectionUnavailable(slot.defn.name, "the client pool is closed (or was never entered)")
        conn = self._conns[slot.defn.name]
        try:
            session, opened = await slot.acquire(self._tg, slot.settings, slot.listings)
        except ConnectionsError:
            if slot is conn.shared:
                # Reopened for one identity (whose headers the open carried) and refused: that identity's
                # failure only. Nothing counts against the shared client, no one queued shares the verdict,
                # and the next use opens a client of its own, which may become the shared one again.
                slot.restarts = RestartState(self._policy)
                slot.open_failed_at = -math.inf
                self._unshare(conn, "its reopen failed")
                conn.learned = False
            raise
        if conn.shared is None and not conn.unshareable and _serves_all(slot):
            self._share(conn, slot)
        return session, opened

    def _share(self, conn: _Connection, slot: _Slot) -> None:
        """A 2026-07-28 client on the fast wire: it serves every identity of `conn` from now on."""
        assert slot.auth is not None
        slot.auth.share()
        for entry in conn.book.identities.values():
            if entry.client is slot:
                entry.client = None
                self._slots.pop(entry.key, None)
        key = f"{conn.defn.name}\x00shared"

        def forget() -> None:
            for entry in conn.book.identities.values():
                self._cache.invalidate(entry.key)

        slot.listings = _Forget(forget)
        self._slots[key] = slot
        conn.shared = slot
        logger.info(
            "connection %r: a 2026-07-28 upstream: one client serves every identity",
            conn.defn.name,
            extra={"event": "identity_shared", "connection": conn.defn.name},
        )

    def _shared_now(self, conn: _Connection) -> _Slot | None:
        """The shared client while its session is open and serves every identity; else None, and it is let go."""
        shared = conn.shared
        if shared is None:
            return None
        opened = _open_client(shared)
        if opened is not None and _fits_all(opened):
            return shared
        if opened is None:
            self._unshare(conn, "its session ended")
            conn.learned = False  # the next open (of the caller's own client) tells the generation again
        else:
            self._unshare(conn, "it no longer fits every identity (its fast wire is off)")
            conn.unshareable = True  # one client per identity from now on
        return None

    def _unshare(self, conn: _Connection, why: str) -> None:
        shared, conn.shared = conn.shared, None
        if shared is not None:
            self._slots.pop(f"{conn.defn.name}\x00shared", None)
            if shared.session is not None:
                shared.retire(shared.session, shared.listings)
            logger.info(
                "connection %r: the shared client is let go: %s",
                conn.defn.name,
                why,
                extra={"event": "identity_unshared", "connection": conn.defn.name},
            )

    def _known_tools(self, name: str) -> Awaitable[list[mt.Tool]]:
        headers = speaking_as()  # set by the call that failed: its identity's listing, not another's
        if headers is None:
            raise UnknownConnection(name, "no identity to list the tools as")
        return self.list_identity_tools(name, headers, use_cache=True)

    def _retire(self, entry: Identity) -> None:
        """The book closed `entry` and no call uses it: its listing goes, and its own client closes."""
        self._cache.invalidate(entry.key)
        slot, entry.client = entry.client, None
        if isinstance(slot, _Slot):
            if self._slots.get(entry.key) is slot:  # a returning identity may hold the key with a new client
                del self._slots[entry.key]
            if slot.session is not None:
                slot.retire(slot.session, slot.listings)

    def _expire(self, now: float) -> None:
        for conn in self._conns.values():
            conn.book.expire(now)
            if not conn.book.identities and conn.shared is not None:
                self._unshare(conn, "no identity is left")

    async def _sweeper(self) -> None:
        pause = min(_SWEEP_MAX, *(c.defn.identity_idle_timeout / 2 for c in self._conns.values()))
        while True:
            await anyio.sleep(max(pause, 0.05))
            self._expire(time.monotonic())


def _open_client(slot: _Slot) -> OpenedClient | None:
    s = slot.session
    return s.opened if s is not None and s.usable else None


def _fits_all(opened: OpenedClient) -> bool:
    # 2026-07-28 binds nothing to the client that opened; the fast wire runs `IdentityAuth` per request.
    return opened.fast_calls and opened.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS


def _serves_all(slot: _Slot) -> bool:
    """Whether `slot`'s open client can serve every identity: a 2026-07-28 session on the fast wire."""
    opened = _open_client(slot)
    return opened is not None and slot.auth is not None and _fits_all(opened)
