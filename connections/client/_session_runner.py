"""One pooled connection's sessions: the slot that opens them and the runner task that owns each one.

`SessionSlot` is a connection of a `ClientPool`: its current session, its restart state
(`connections/client/_restart.py`) and the lock that makes concurrent first uses share one open. anyio requires a
client's task groups to be entered and left by one task, so each session lives in a runner task
(`run_session`) of the pool's task group; callers in any task share it through `PooledSession`.
A stdio child first waits for a start slot (`OpenSettings.start_limiter`: at most that many children
start at once, each holding its slot until its handshake is done or has failed), so a project with many
children starts them in bounded batches instead of all at once. The runner bounds the open by
`timeouts.connect`, counted from the child's own start (not from the queue), reports the outcome on
`ready`, then waits until
the slot retires the session (`wake`) or its transport ends by itself (the stdio child exits, the
SSE stream drops), and closes the client. It never raises into the task group: a failure to open
becomes `PooledSession.error`, translated.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import anyio
import anyio.abc
import httpx2
from mcp.client.session import IncomingMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .._call_context import calling
from .._exceptions import (
    ConnectionsError,
    ConnectionUnauthorized,
    ConnectionUnavailable,
    EnvironmentVariableMissing,
    UpstreamTimeout,
)
from ..project._definitions import ConnectionDefinition
from ._clients import OpenedClient, client_mode, open_client
from ._listing_cache import ListingCache
from ._restart import Cause, RestartState
from ._translate import REOPEN_NOTE, translate
from ._upstream_changes import Change, change_of, listen_for_changes
from ._warm import StartBatch

__all__ = ["CLOSE_GRACE", "ConnectionStatus", "OpenSettings", "PooledSession", "SessionSlot", "run_session"]

logger = logging.getLogger(__name__)

CLOSE_GRACE = 10.0
"""Seconds a session has to close: stdin close (2 s) + SIGTERM (2 s) + SIGKILL reap (2 s), with room to spare."""


@dataclass(frozen=True, slots=True)
class ConnectionStatus:
    """What the pool knows about one connection (for `agent-sdk mcp list`, `/v1/info` and tests)."""

    name: str
    state: Literal["idle", "queued", "opening", "open", "paused", "needs_login"]
    """`queued`: a stdio child waiting for a start slot (`serve --start-limit`); `opening`: starting;
    `needs_login`: the last open was refused for want of OAuth tokens (waiting for a login, not crashing)."""
    opens: int
    """Sessions opened so far (the first open plus every restart)."""
    failures: int
    """Counted failures (the connection's own: `connections/client/_restart.py`) since the last successful operation."""
    protocol_version: str | None
    pid: int | None
    """The stdio child's process id while it runs."""
    last_error: str | None
    fast_calls: bool = False
    """`tools/call` and `tools/list` take the fast wire (a pooled Streamable HTTP session; docs/clients.md)."""
    instructions: str | None = None
    """What the open session's server said of itself (`initialize` / `server/discover` `instructions`)."""


@dataclass(slots=True)
class PooledSession:
    """One session of a pooled connection, shared by every caller while it is usable."""

    started: float
    launched: anyio.Event = field(default_factory=anyio.Event)
    """Set once the open began: a stdio child got its start slot (at once for other kinds)."""
    launched_at: float = math.inf
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set to make the runner close the session."""
    ready: anyio.Event = field(default_factory=anyio.Event)
    """Set once the open succeeded (`opened`) or failed (`error`)."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    opened: OpenedClient | None = None
    error: ConnectionsError | None = None
    stopping: bool = False
    """Retired: closing (or closed); never handed out again."""
    opening: anyio.CancelScope | None = None
    """The open in progress (start, connect, handshake): the pool's `aclose` cancels it rather than wait it out."""

    @property
    def usable(self) -> bool:
        return self.opened is not None and self.opened.alive and not self.wake.is_set()


@dataclass(frozen=True, slots=True)
class OpenSettings:
    """What every session of one pool opens with."""

    environ: Mapping[str, str]
    auth_for: Callable[[ConnectionDefinition], httpx2.Auth | None] | None
    child_env: Mapping[str, str]
    fast_calls: bool
    start_limiter: anyio.CapacityLimiter | None = None
    """How many stdio children may be starting at once (None: no bound)."""
    headers_per_call: bool = False
    """`auth_for` only adds an identity's headers; the fast wire takes them per call (`pool/_identity_pool.py`)."""
    starts: StartBatch = field(default_factory=StartBatch)
    """The stdio children starting together, for the "N of M ready" log line."""


class SessionSlot:
    """One connection of a `ClientPool`: its current session, its restart state, and the lock first uses share."""

    def __init__(self, defn: ConnectionDefinition, restarts: RestartState) -> None:
        self.defn = defn
        self.restarts = restarts
        self.lock = anyio.Lock()
        self.session: PooledSession | None = None
        self.open_failed_at = -math.inf
        self.learned_mode: str | None = None
        self.opens = 0
        self.closing = False
        """The pool is closing: a session that ends now is not retired (nor counted)."""
        self.operator_restart = False
        """An operator restarted it (`ClientPool.restart`): its next open is an action, not a failure."""

    def status(self) -> ConnectionStatus:
        """Where the connection stands: idle, opening, open or paused, with its open and failure counts."""
        s = self.session
        state: Literal["idle", "queued", "opening", "open", "paused", "needs_login"] = "idle"
        if self.restarts.paused(anyio.current_time()):
            state = "paused"
        elif s is not None and s.usable:
            state = "open"
        elif s is not None and not s.ready.is_set():
            state = "opening" if s.launched.is_set() else "queued"
        elif isinstance(self.restarts.last_error, ConnectionUnauthorized):
            state = "needs_login"
        live = s.opened if s is not None and s.opened is not None and s.usable else None
        last_error = self.restarts.last_error
        return ConnectionStatus(
            name=self.defn.name,
            state=state,
            opens=self.opens,
            failures=len(self.restarts.failures),
            protocol_version=live.protocol_version if live is not None else None,
            pid=live.child.pid if live is not None and live.child is not None else None,
            last_error=str(last_error) if last_error is not None else None,
            fast_calls=live is not None and live.fast_calls,
            instructions=live.client.instructions if live is not None else None,
        )

    async def acquire(
        self, tg: anyio.abc.TaskGroup, settings: OpenSettings, cache: ListingCache
    ) -> tuple[PooledSession, OpenedClient]:
        """The usable session, opening one (after the policy's backoff) when there is none.

        Raises the open's typed error, or `ConnectionUnavailable` while restarts are paused.
        """
        s = self.session
        if s is not None and s.usable and s.opened is not None:
            return s, s.opened  # the hot path: no lock
        arrived = anyio.current_time()
        async with self.lock:
            s = self.session
            if s is not None and not s.ready.is_set():
                await self._wait_ready(s)
            if s is not None and s.usable and s.opened is not None:
                return s, s.opened
            if s is not None:
                self.retire(s, cache)
            restarts = self.restarts
            if restarts.last_error is not None and self.open_failed_at >= arrived:
                raise restarts.last_error  # an open attempted while we queued failed: share its verdict
            now = anyio.current_time()
            if restarts.paused(now):
                raise restarts.pause_error(self.defn.name, now)
            delay = restarts.delay()
            if delay:
                await anyio.sleep(delay)
            return await self._open(tg, settings, cache)

    async def _open(
        self, tg: anyio.abc.TaskGroup, settings: OpenSettings, cache: ListingCache
    ) -> tuple[PooledSession, OpenedClient]:
        defn = self.defn
        if self.session is not None:
            self.retire(self.session, cache)
        s = PooledSession(started=anyio.current_time())
        self.session = s
        self.opens += 1
        if self.opens > 1 and self.operator_restart:  # asked for: an INFO line, not a failure
            logger.info(
                "connection %r: reopening its upstream session (open #%d) after an operator's restart",
                defn.name,
                self.opens,
                extra={"event": "upstream_reopen", "connection": defn.name},
            )
        # serve's log (docs/operations.md): each reopen once, with what ended the last session (a refused login
        # is not a session that ended: it is said once, below).
        elif self.opens > 1 and not isinstance(self.restarts.last_error, ConnectionUnauthorized):
            logger.warning(
                "connection %r: reopening its upstream session (open #%d); last error: %s",
                defn.name,
                self.opens,
                self.restarts.last_error or "the session ended",
                extra={"event": "upstream_restart", "connection": defn.name},
            )
        self.operator_restart = False
        cache.invalidate(defn.name)

        def list_changed(change: Change) -> None:
            cache.changed(defn.name, change)

        def ended() -> None:
            if not self.closing:
                self.retire(s, cache)

        mode = client_mode(defn, self.learned_mode)
        runner = run_session(defn, s, settings, mode=mode, on_list_changed=list_changed, on_end=ended)
        # Started from a first caller's task, but it serves every caller: it must not inherit that caller's
        # call context (`_call_context.py`), or the session's reader would route others' requests to it.
        with calling(None):
            tg.start_soon(lambda: runner, name=f"mcp-client:{defn.name}")
        await self._wait_ready(s)
        if s.error is not None:
            if isinstance(s.error, ConnectionUnauthorized):
                # Waiting for a login is not a crash: no count, no pause, no reopen warning per use; said once.
                self.opens -= 1
                if not isinstance(self.restarts.last_error, ConnectionUnauthorized):
                    logger.warning(
                        "connection %r: waiting for a login: %s",
                        defn.name,
                        s.error.detail,
                        extra={"event": "needs_login", "connection": defn.name},
                    )
            elif not isinstance(s.error, EnvironmentVariableMissing):  # a setup mistake, not a crash
                self.restarts.record(defn.name, s.error, anyio.current_time())
            self.restarts.last_error = s.error
            self.open_failed_at = anyio.current_time()
            raise s.error
        assert s.opened is not None
        if defn.protocol == "auto" and s.opened.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            self.learned_mode = "legacy"  # a restart skips the probe this upstream failed
        return s, s.opened

    async def _wait_ready(self, s: PooledSession) -> None:
        # A queued child waits its turn (every start ahead of it is bounded by its own connect timeout);
        # the open itself is bounded from its own start. The runner bounds it by `timeouts.connect`;
        # this is the belt to its braces. A caller cancelled meanwhile leaves the open running: the
        # next use waits for the same child instead of starting another.
        await s.launched.wait()
        with anyio.move_on_after(s.launched_at + self.defn.timeouts.connect + CLOSE_GRACE - anyio.current_time()):
            await s.ready.wait()
        if not s.ready.is_set():
            s.stopping = True
            s.wake.set()
            s.error = UpstreamTimeout(self.defn.name, "opening the connection timed out")
            s.ready.set()

    def retire(self, s: PooledSession, cache: ListingCache, cause: Cause | None = None) -> None:
        """Stop using `s`; count it as a failure when its `cause` is the connection's own. Idempotent.

        Without a cause (the session ended by itself, or was found unusable), a stdio child that
        exited counts and a remote transport that ended does not (`connections/client/_restart.py`).
        """
        if s.stopping:
            return
        s.stopping = True
        s.wake.set()
        kind = self.defn.kind
        if cause is None and s.opened is not None and not s.opened.alive:
            cause = "count" if kind == "stdio" else "reopen"
        if cause is None:
            return
        cache.invalidate(self.defn.name)
        if cause == "count":
            child = s.opened.child if s.opened is not None else None
            exited = f"the server process exited{child.exit_text() if child is not None else ''}"
            what = exited if kind == "stdio" else "the connection failed"
            error = ConnectionUnavailable(self.defn.name, f"{what}{REOPEN_NOTE}")
            self.restarts.record(self.defn.name, error, anyio.current_time())


async def run_session(
    defn: ConnectionDefinition,
    s: PooledSession,
    settings: OpenSettings,
    *,
    mode: str,
    on_list_changed: Callable[[Change], None],
    on_end: Callable[[], None],
) -> None:
    """Open `defn` as `s`, hold it until `s.wake`, close it; `on_end()` once it is over (unless the pool closes)."""
    status: list[int] = []
    limiter = settings.start_limiter if defn.kind == "stdio" else None
    holding = False
    counted = limiter is not None  # a stdio start: one of its batch's "N of M ready"
    if counted:
        settings.starts.begin()
    try:
        if limiter is not None:
            with anyio.CancelScope() as queued:
                s.opening = queued  # a pool closing meanwhile cancels the wait, as it cancels an open
                await limiter.acquire()
                holding = True
            if not holding:
                return  # the pool is closing: `finally` reports it
        s.launched_at = anyio.current_time()
        s.launched.set()
        with anyio.CancelScope(deadline=s.launched_at + defn.timeouts.connect) as scope:
            s.opening = scope
            try:
                async with open_client(
                    defn,
                    environ=settings.environ,
                    auth=settings.auth_for(defn) if settings.auth_for is not None and defn.url else None,
                    on_message=_on_message(s, on_list_changed),
                    mode=mode,
                    http_status=status,
                    child_env=settings.child_env,
                    fast_calls=settings.fast_calls,
                    headers_per_call=settings.headers_per_call,
                ) as opened:
                    scope.deadline = math.inf
                    s.opened = opened
                    s.ready.set()
                    if counted:
                        counted = False
                        settings.starts.finish(defn.name, ok=True)
                    if holding:
                        assert limiter is not None
                        holding = False
                        limiter.release()
                    async with anyio.create_task_group() as watch:
                        watch.start_soon(_relay, opened.gone, s.wake)
                        watch.start_soon(listen_for_changes, defn.name, opened.client, _live(s, on_list_changed))
                        await s.wake.wait()
                        watch.cancel_scope.cancel()
            except Exception as exc:
                if s.opened is None and not scope.cancel_called:
                    s.error = translate(defn, exc, "connect", http_status=status)
                elif s.opened is not None:
                    logger.debug("connection %r: error while closing: %s", defn.name, type(exc).__name__)
        if s.opened is None and s.error is None and scope.cancel_called:
            s.error = UpstreamTimeout(defn.name, f"opening the connection timed out after {defn.timeouts.connect:g}s")
    finally:
        if holding:
            assert limiter is not None
            limiter.release()
        if s.opened is None and s.error is None:
            s.error = ConnectionUnavailable(defn.name, "the client pool is closing")
        if counted:
            settings.starts.finish(defn.name, ok=False)
        on_end()
        s.launched.set()
        s.ready.set()
        s.finished.set()


def _live(s: PooledSession, on_list_changed: Callable[[Change], None]) -> Callable[[Change], None]:
    """`on_list_changed`, for as long as `s` is not retired."""

    def changed(change: Change) -> None:
        if not s.stopping:
            on_list_changed(change)

    return changed


def _on_message(
    s: PooledSession, on_list_changed: Callable[[Change], None]
) -> Callable[[IncomingMessage], Awaitable[None]]:
    report = _live(s, on_list_changed)

    async def handle(message: IncomingMessage) -> None:
        # MCP 2025-11-25 server/tools §List Changed Notification (and resources, prompts): tell the cache.
        change = change_of(message)
        if change is not None:
            report(change)
        await anyio.lowlevel.checkpoint()

    return handle


async def _relay(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()
