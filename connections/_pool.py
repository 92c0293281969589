"""`ClientPool`: one lazily opened, reused upstream session per connection.

Each open session is owned by a runner task in the pool's task group (anyio requires a client's
task groups to be entered and left by one task); callers in any task share it. The first use
opens it under a per-connection lock, so concurrent first uses open one session, not several.
A session whose transport ends (a stdio child exits, an SSE stream drops) is replaced on the next
use, after a backoff; too many consecutive failures pause restarts (crash loop) and every use
fails fast with `ConnectionUnavailable` until the pause ends. Closing the pool closes every
client: stdin closed, a grace period, then the child's whole process group is killed (the SDK's
stdio shutdown, shielded from cancellation). See docs/clients.md.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp.types as mt
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS
from mcp_types import methods as _methods

from ._account import AccountConnections
from ._clients import REOPEN_NOTE, OpenedClient, client_mode, leaves, list_all_tools, open_client, translate
from ._definitions import ConnectionDefinition
from ._exceptions import (
    ClientError,
    ConnectionsError,
    ConnectionUnavailable,
    EnvironmentVariableMissing,
    UnknownConnection,
    UnknownTool,
    UpstreamError,
    UpstreamTimeout,
)
from ._listing_cache import DEFAULT_LISTING_TTL, ListingCache
from ._raw_results import RawToolResult

__all__ = ["AuthFor", "ClientPool", "ConnectionStatus", "RestartPolicy"]

logger = logging.getLogger(__name__)

AuthFor = Callable[[ConnectionDefinition], "httpx2.Auth | None"]
"""Returns the `httpx2.Auth` for an HTTP/SSE connection (the host OAuth provider), or None."""

_T = TypeVar("_T")
_LACKS_TOOL_BUDGET = 5.0
_EXIT_PEEK_S = 0.5
"""How long a call that lost its stdio child waits for the exit status to name it in the error."""
_CLOSE_GRACE = 10.0  # stdin close (2 s) + SIGTERM (2 s) + SIGKILL reap (2 s), with room to spare


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When a failed or exited upstream is opened again (see docs/clients.md)."""

    backoff_initial: float = 0.25
    """Delay before the second consecutive attempt; doubles each time. The first restart is immediate."""
    backoff_max: float = 5.0
    crash_loop_failures: int = 5
    """This many consecutive failures within `crash_loop_window` seconds pause restarts."""
    crash_loop_window: float = 60.0
    crash_loop_pause: float = 30.0
    """Seconds every use fails fast with `ConnectionUnavailable`; then one attempt is let through."""

    def delay(self, failures: int) -> float:
        if failures <= 1:
            return 0.0
        return min(self.backoff_initial * 2 ** (failures - 2), self.backoff_max)


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """What the pool knows about one connection (for `agent-sdk mcp list`, `/v1/info` and tests)."""

    name: str
    state: Literal["idle", "opening", "open", "paused"]
    opens: int
    """Sessions opened so far (the first open plus every restart)."""
    failures: int
    """Consecutive failures (open failures and unexpected exits) since the last successful operation."""
    protocol_version: str | None
    pid: int | None
    """The stdio child's process id while it runs."""
    last_error: str | None
    fast_calls: bool = False
    """`tools/call` and `tools/list` take the fast wire (a pooled Streamable HTTP session; docs/clients.md)."""


@dataclass(slots=True)
class _Session:
    started: float
    wake: anyio.Event = field(default_factory=anyio.Event)
    ready: anyio.Event = field(default_factory=anyio.Event)
    finished: anyio.Event = field(default_factory=anyio.Event)
    opened: OpenedClient | None = None
    error: ConnectionsError | None = None
    stopping: bool = False
    """Retired: closing (or closed); never handed out again."""
    broken: bool = False
    """An operation found the transport unusable (connection refused, stream closed)."""
    opening: anyio.CancelScope | None = None
    """The open in progress (start, connect, handshake): `aclose` cancels it rather than wait it out."""

    @property
    def usable(self) -> bool:
        return self.opened is not None and self.opened.alive and not self.wake.is_set()


@dataclass(slots=True)
class _Slot:
    defn: ConnectionDefinition
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    session: _Session | None = None
    failures: list[float] = field(default_factory=list[float])
    last_error: ConnectionsError | None = None
    open_failed_at: float = -math.inf
    paused_until: float = -math.inf
    learned_mode: str | None = None
    opens: int = 0


class ClientPool:
    """Lazily opened, shared upstream sessions for a project's connections (static headers only).

    Use as `async with ClientPool(connections, environ=..., auth_for=...) as pool`. Enter and leave
    it in one task (the app's lifespan); call its methods from any task.
    """

    def __init__(
        self,
        connections: Mapping[str, ConnectionDefinition],
        *,
        environ: Mapping[str, str] | None = None,
        auth_for: AuthFor | None = None,
        listing_ttl: float = DEFAULT_LISTING_TTL,
        restart_policy: RestartPolicy | None = None,
        child_env: Mapping[str, str] | None = None,
    ) -> None:
        self._slots = {name: _Slot(defn) for name, defn in connections.items()}
        self._environ: Mapping[str, str] = dict(os.environ) if environ is None else environ
        self._auth_for = auth_for
        self._cache = ListingCache(listing_ttl)
        self._policy = restart_policy or RestartPolicy()
        self._child_env = dict(child_env or {})
        # `AGENT_SDK_FAST_CALLS=0` keeps every pooled tools/call on the SDK transport (docs/clients.md).
        self._fast_calls = self._environ.get("AGENT_SDK_FAST_CALLS", "1") != "0"
        self._tg: anyio.abc.TaskGroup | None = None
        self._closed = False
        accounts = {name: d for name, d in connections.items() if d.kind == "account"}
        # Account connections forward to hub connectors through a pool of their own (docs/accounts.md).
        self._accounts: AccountConnections | None = None
        if accounts:
            self._accounts = AccountConnections(
                accounts,
                environ=self._environ,
                make_pool=lambda auth: ClientPool(
                    {}, environ=self._environ, auth_for=auth, listing_ttl=listing_ttl, restart_policy=restart_policy
                ),
            )

    async def __aenter__(self) -> ClientPool:
        if self._tg is not None or self._closed:
            raise RuntimeError("a ClientPool is entered once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        if self._accounts is not None:
            await self._accounts.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every session and stop every child (stdin closed, grace period, process group killed)."""
        if self._closed:
            return
        self._closed = True
        tg, self._tg = self._tg, None
        if tg is None:
            return
        if self._accounts is not None:
            await self._accounts.aclose()  # its task group was entered inside ours: leave it first
        for slot in self._slots.values():
            if slot.session is not None:
                slot.session.stopping = True
                slot.session.wake.set()
                if slot.session.opened is None and slot.session.opening is not None:
                    # Ctrl-C during a connect to a server that never answers: stop now, not at the
                    # connect timeout (a stdio child's shutdown stays shielded inside the SDK).
                    slot.session.opening.cancel()
        # Every runner closes its own client in parallel; a stdio child's shutdown is shielded
        # inside the SDK, so a cancelled owner (Ctrl-C of `serve`) still stops every child.
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_GRACE):
            for slot in self._slots.values():
                if slot.session is not None:
                    await slot.session.finished.wait()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    def names(self) -> list[str]:
        """Every connection's name, sorted."""
        return sorted(self._slots)

    def add(self, defn: ConnectionDefinition) -> None:
        """Add a connection the pool did not start with (an account's hub connectors); a known name is kept."""
        self._slots.setdefault(defn.name, _Slot(defn))

    def account_connectors(self, name: str) -> tuple[str, ...] | None:
        """The hub connectors account connection `name` last resolved to (None before its first use)."""
        return self._accounts.resolved(name) if self._accounts is not None else None

    def definition(self, name: str) -> ConnectionDefinition:
        """The definition of `name`. Raises `UnknownConnection`."""
        return self._slot(name).defn

    @property
    def listing_cache(self) -> ListingCache:
        """The listing cache (its `hits` and `misses` counters feed the gateway's metrics)."""
        return self._cache

    def status(self, name: str) -> ConnectionStatus:
        """Where `name` stands: idle, opening, open or paused, with its open and failure counts."""
        slot = self._slot(name)
        s = slot.session
        state: Literal["idle", "opening", "open", "paused"] = "idle"
        if anyio.current_time() < slot.paused_until:
            state = "paused"
        elif s is not None and s.usable:
            state = "open"
        elif s is not None and not s.ready.is_set():
            state = "opening"
        live = s.opened if s is not None and s.opened is not None and s.usable else None
        version = live.protocol_version if live is not None else None
        pid = live.child.pid if live is not None and live.child is not None else None
        return ConnectionStatus(
            name=name,
            state=state,
            opens=slot.opens,
            failures=len(slot.failures),
            protocol_version=version,
            pid=pid,
            last_error=str(slot.last_error) if slot.last_error is not None else None,
            fast_calls=live is not None and live.fast_calls,
        )

    async def list_tools(self, name: str, *, use_cache: bool = False) -> list[mt.Tool]:
        """`tools/list` (all pages) with the allow/deny lists applied, under the `list` timeout.

        `use_cache=True` answers from the listing cache when a fresh entry exists (connections
        without an `auth` callback only). Raises `UnknownConnection`, `UpstreamError`,
        `UpstreamTimeout`, `ConnectionUnavailable`, `EnvironmentVariableMissing`.
        """
        slot = self._slot(name)
        if self._accounts is not None and slot.defn.kind == "account":
            return await self._accounts.list_tools(slot.defn, use_cache=use_cache)
        cacheable = slot.defn.auth is None
        if use_cache and cacheable:
            cached = self._cache.get(name)
            if cached is not None:
                return cached
        generation = 0

        async def run(opened: OpenedClient) -> list[mt.Tool]:
            nonlocal generation
            # Taken on the session that answers (opening one invalidates the last one's listing), so a
            # `list_changed` or a new session while this listing is under way still wins.
            generation = self._cache.generation(name)
            return await list_all_tools(slot.defn, opened.client)

        tools = await self._operate(slot, "list", run, slot.defn.timeouts.list)
        if cacheable:
            self._cache.put(name, tools, generation)
        return tools

    async def call_tool(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> mt.CallToolResult:
        """`tools/call` under the `call` timeout; an `isError` result is returned, not raised.

        Raises `UnknownConnection`, `UnknownTool` (hidden by allow/deny, or absent upstream),
        `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`, `EnvironmentVariableMissing`.
        """
        slot = self._slot(name)
        args = self._call_arguments(slot, tool, arguments)
        if self._accounts is not None and slot.defn.kind == "account":
            return await self._accounts.call_tool(slot.defn, tool, args)

        async def run(opened: OpenedClient) -> mt.CallToolResult:
            return await opened.client.call_tool(tool, args)

        result = await self._call(slot, tool, run)
        if result.is_error and await self._lacks_tool(name, tool):
            raise UnknownTool(name, tool)
        return result

    async def call_tool_raw(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> RawToolResult:
        """`call_tool`, with the result as JSON for a surface that forwards it (`RawToolResult`).

        On a fast-wire session, for a tool whose fresh listing declares no output schema, the
        upstream's answer is validated once against the negotiated version's schema and never
        becomes a model; otherwise this is `call_tool`'s result, dumped. Raises what `call_tool` raises.
        """
        slot = self._slot(name)
        args = self._call_arguments(slot, tool, arguments)
        if self._accounts is not None and slot.defn.kind == "account":
            return RawToolResult.from_model(await self._accounts.call_tool(slot.defn, tool, args))
        listed = self._cache.tool(name, tool)
        raw_ok = listed is not None and listed.output_schema is None  # else the SDK checks structured content

        async def run(opened: OpenedClient) -> RawToolResult:
            if opened.fast is None or not raw_ok:
                return RawToolResult.from_model(await opened.client.call_tool(tool, args))
            version = opened.protocol_version
            raw = await opened.fast.call_tool(tool, args)
            return RawToolResult(_methods.serialize_server_result("tools/call", version, raw), version)

        result = await self._call(slot, tool, run)
        if result.is_error and await self._lacks_tool(name, tool):
            raise UnknownTool(name, tool)
        return result

    # -- internals --------------------------------------------------------------------------

    @staticmethod
    def _call_arguments(slot: _Slot, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if not slot.defn.allows_tool(tool):
            raise UnknownTool(
                slot.defn.name, tool, f"tool {tool!r} is not allowed by the connection's allow/deny lists"
            )
        return dict(arguments or {})

    def _call(self, slot: _Slot, tool: str, run: Callable[[OpenedClient], Awaitable[_T]]) -> Awaitable[_T]:
        # A plain function handing back `_operate`'s coroutine: no frame of its own on the hot path.
        return self._operate(slot, "call", run, slot.defn.timeouts.call, tool=tool)

    def _slot(self, name: str) -> _Slot:
        slot = self._slots.get(name)
        if slot is None:
            known = ", ".join(sorted(self._slots)) or "none"
            raise UnknownConnection(name, f"no such connection (defined: {known})")
        return slot

    async def _lacks_tool(self, name: str, tool: str) -> bool:
        """Whether the upstream's listing lacks `tool` (asked only after a call failed)."""
        tools: list[mt.Tool] | None = None
        with anyio.move_on_after(_LACKS_TOOL_BUDGET):  # an error path: never wait out a long list timeout
            try:
                tools = await self.list_tools(name, use_cache=True)
            except ConnectionsError:
                return False
        return tools is not None and all(t.name != tool for t in tools)

    async def _operate(
        self,
        slot: _Slot,
        operation: Literal["list", "call"],
        run: Callable[[OpenedClient], Awaitable[_T]],
        budget: float,
        *,
        tool: str | None = None,
    ) -> _T:
        """`run` on the slot's session within `budget`, as `operation`; errors translated to `ConnectionsError`s.

        A failed call (an `UpstreamError`) whose tool the upstream's listing lacks is `UnknownTool`.
        """
        try:
            for attempt in (1, 2):
                session = slot.session
                if session is not None and session.usable and session.opened is not None and not self._closed:
                    opened = session.opened  # the hot path: no lock, no extra frame
                else:
                    session, opened = await self._acquire(slot)
                try:
                    if opened.fast is not None:
                        # A fast-wire session means asyncio (`install_fast_calls`), whose own timeout costs
                        # a fraction of an anyio cancel scope: anyio sets up state for every new task, and
                        # every request the gateway serves is one (9 % of its CPU per passthrough call).
                        async with asyncio.timeout(budget):
                            result = await run(opened)
                    else:
                        result = await _within(budget, run, opened)
                    if slot.failures:
                        slot.failures.clear()
                    return result
                except ClientError:
                    raise
                except TimeoutError:
                    raise self._timeout(slot, operation, tool, budget) from None
                except Exception as exc:
                    if attempt == 1 and _session_expired(exc, opened):
                        # MCP 2025-11-25 transports §Session Management: on 404 for our session id the
                        # client MUST start a new session. The server did not know the session, so the
                        # request was not processed: one retry on a fresh session is safe.
                        session.broken = True
                        self._retire(slot, session)
                        continue
                    if opened.child is not None and _closed(exc):
                        with anyio.move_on_after(_EXIT_PEEK_S):  # the exit status, for the message
                            await opened.child.process.wait()
                    error = translate(
                        slot.defn, exc, operation, http_status=opened.http_status, tool=tool, child=opened.child
                    )
                    if isinstance(error, ConnectionUnavailable):
                        session.broken = True
                        self._retire(slot, session)  # the next use opens a new session
                    raise error from None
            raise AssertionError("unreachable")  # pragma: no cover
        except UpstreamError:
            if tool is None or not await self._lacks_tool(slot.defn.name, tool):
                raise
            raise UnknownTool(slot.defn.name, tool) from None

    def _timeout(self, slot: _Slot, operation: str, tool: str | None, budget: float) -> UpstreamTimeout:
        doing = "tools/list" if operation == "list" else f"tools/call {tool!r}"
        return UpstreamTimeout(slot.defn.name, f"{doing} timed out after {budget:g}s")

    async def _acquire(self, slot: _Slot) -> tuple[_Session, OpenedClient]:
        if self._closed or self._tg is None:
            raise ConnectionUnavailable(slot.defn.name, "the client pool is closed (or was never entered)")
        if slot.defn.kind == "account":
            raise ConnectionUnavailable(slot.defn.name, "account connections are reached through the account bridge")
        s = slot.session
        if s is not None and s.usable and s.opened is not None:
            return s, s.opened  # the hot path: no lock
        arrived = anyio.current_time()
        async with slot.lock:
            s = slot.session
            if s is not None and not s.ready.is_set():
                await self._wait_ready(slot, s)
            if s is not None and s.usable and s.opened is not None:
                return s, s.opened
            if s is not None:
                self._retire(slot, s)
            if slot.last_error is not None and slot.open_failed_at >= arrived:
                raise slot.last_error  # an open attempted while we queued failed: share its verdict
            now = anyio.current_time()
            if now < slot.paused_until:
                raise ConnectionUnavailable(
                    slot.defn.name,
                    f"restarts are paused for {slot.paused_until - now:.0f}s after "
                    f"{len(slot.failures)} consecutive failures (crash loop); last error: {slot.last_error}",
                )
            delay = self._policy.delay(len(slot.failures))
            if delay:
                await anyio.sleep(delay)
            return await self._open(slot)

    async def _open(self, slot: _Slot) -> tuple[_Session, OpenedClient]:
        assert self._tg is not None
        if slot.session is not None:
            self._retire(slot, slot.session)
        s = _Session(started=anyio.current_time())
        slot.session = s
        slot.opens += 1
        if slot.opens > 1:  # serve's log (docs/operations.md): each reopen once, with what ended the last session
            logger.warning(
                "connection %r: reopening its upstream session (open #%d); last error: %s",
                slot.defn.name,
                slot.opens,
                slot.last_error or "the session ended",
                extra={"event": "upstream_restart", "connection": slot.defn.name},
            )
        self._cache.invalidate(slot.defn.name)
        self._tg.start_soon(self._run, slot, s, name=f"mcp-client:{slot.defn.name}")
        await self._wait_ready(slot, s)
        if s.error is not None:
            if not isinstance(s.error, EnvironmentVariableMissing):  # a setup mistake, not a crash
                self._record_failure(slot, s.error)
            slot.last_error = s.error
            slot.open_failed_at = anyio.current_time()
            raise s.error
        assert s.opened is not None
        return s, s.opened

    async def _wait_ready(self, slot: _Slot, s: _Session) -> None:
        # The runner bounds the open by `timeouts.connect`; this is the belt to its braces.
        with anyio.move_on_after(slot.defn.timeouts.connect + _CLOSE_GRACE):
            await s.ready.wait()
        if not s.ready.is_set():
            s.stopping = True
            s.wake.set()
            s.error = UpstreamTimeout(slot.defn.name, "opening the connection timed out")
            s.ready.set()

    def _retire(self, slot: _Slot, s: _Session) -> None:
        """Stop using `s`; if it ended by itself (not by us), count that as one failure. Idempotent."""
        if s.stopping:
            return
        s.stopping = True
        s.wake.set()
        if (s.opened is not None and not s.opened.alive) or s.broken:
            child = s.opened.child if s.opened is not None else None
            exited = f"the server process exited{child.exit_text() if child is not None else ''}"
            what = exited if slot.defn.kind == "stdio" else "the connection closed"
            self._record_failure(slot, ConnectionUnavailable(slot.defn.name, f"{what}{REOPEN_NOTE}"))
            self._cache.invalidate(slot.defn.name)

    def _record_failure(self, slot: _Slot, error: ConnectionsError) -> None:
        now = anyio.current_time()
        window = self._policy.crash_loop_window
        slot.failures = [t for t in slot.failures if now - t <= window] + [now]
        slot.last_error = error
        if len(slot.failures) >= self._policy.crash_loop_failures:
            slot.paused_until = now + self._policy.crash_loop_pause
            logger.warning(
                "connection %r: %d consecutive failures; restarts paused for %gs",
                slot.defn.name,
                len(slot.failures),
                self._policy.crash_loop_pause,
            )

    async def _run(self, slot: _Slot, s: _Session) -> None:
        """Own one session from open to close; never raises into the pool's task group."""
        defn = slot.defn
        status: list[int] = []
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + defn.timeouts.connect) as scope:
                s.opening = scope
                try:
                    async with open_client(
                        defn,
                        environ=self._environ,
                        auth=self._auth_for(defn) if self._auth_for is not None and defn.url else None,
                        on_message=self._on_message(defn.name, s),
                        mode=client_mode(defn, slot.learned_mode),
                        http_status=status,
                        child_env=self._child_env,
                        fast_calls=self._fast_calls,
                    ) as opened:
                        scope.deadline = math.inf
                        if defn.protocol == "auto" and opened.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
                            slot.learned_mode = "legacy"  # a restart skips the probe this upstream failed
                        s.opened = opened
                        s.ready.set()
                        async with anyio.create_task_group() as watch:
                            watch.start_soon(_relay, opened.gone, s.wake)
                            await s.wake.wait()
                            watch.cancel_scope.cancel()
                except Exception as exc:
                    if s.opened is None and not scope.cancel_called:
                        s.error = translate(defn, exc, "connect", http_status=status)
                    elif s.opened is not None:
                        logger.debug("connection %r: error while closing: %s", defn.name, type(exc).__name__)
            if s.opened is None and s.error is None and scope.cancel_called:
                s.error = UpstreamTimeout(
                    defn.name, f"opening the connection timed out after {defn.timeouts.connect:g}s"
                )
        finally:
            if s.opened is None and s.error is None:
                s.error = ConnectionUnavailable(defn.name, "the client pool is closing")
            if not self._closed:
                self._retire(slot, s)
            s.ready.set()
            s.finished.set()

    def _on_message(self, name: str, s: _Session) -> Callable[[IncomingMessage], Awaitable[None]]:
        async def handle(message: IncomingMessage) -> None:
            # MCP 2025-11-25 server/tools §List Changed Notification: drop the cached listing.
            if isinstance(message, mt.ToolListChangedNotification) and slot_is_current():
                self._cache.invalidate(name)
            await anyio.lowlevel.checkpoint()

        def slot_is_current() -> bool:
            return not s.stopping

        return handle


async def _relay(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()


async def _within(budget: float, run: Callable[[OpenedClient], Awaitable[_T]], opened: OpenedClient) -> _T:
    """`run(opened)` within `budget` seconds, else `TimeoutError` (anyio: any backend)."""
    with anyio.CancelScope(deadline=anyio.current_time() + budget):  # a bare scope costs a third of fail_after
        return await run(opened)
    raise TimeoutError  # the deadline passed: the scope caught its own cancellation


def _session_expired(exc: BaseException, opened: OpenedClient) -> bool:
    """The Streamable HTTP server no longer knows our `Mcp-Session-Id` (it restarted or expired it).

    The spec's answer is 404: the SDK reports a bare 404 as "Session terminated", and a server that
    sends a JSON-RPC body with its 404 (the Python SDK's "Session not found") is recognised by the
    status the client saw. Servers built on the TypeScript SDK's examples (the reference server
    `server-everything` among them) answer 400 instead, with an error body that has no `id` (so
    the SDK reports only "Server returned an error response"). A 400 is a refusal either way: the
    server did not process the request, so one retry on a fresh session is safe, and a request
    that is really malformed fails again there and is reported.
    """
    for leaf in leaves(exc):
        if not isinstance(leaf, MCPError):
            continue
        if leaf.code == mt.INVALID_REQUEST and (leaf.message == "Session terminated" or opened.http_status == [404]):
            return True
        if opened.http_status == [400]:
            return True
    return False


def _closed(exc: BaseException) -> bool:
    """The session's transport closed under the call (a stdio child exited, a stream ended)."""
    return any(isinstance(e, MCPError) and e.code == mt.CONNECTION_CLOSED for e in leaves(exc))
