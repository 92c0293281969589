"""`ClientPool`: one lazily opened, reused upstream session per connection (stdio, HTTP, SSE).

Each open session is owned by a runner task in the pool's task group (`connections/client/_session_runner.py`);
callers in any task share it. The first use opens it under a per-connection lock, so concurrent
first uses open one session, not several. A failed operation is judged by its cause
(`connections/client/_restart.py`, applied in `pool/_failures.py`): a call's own failure fails that call; a
session whose transport ended is replaced on the next use; the connection's own failures (a child that exits, a
server that refuses) count, with backoff, toward a pause during which every use fails fast with
`ConnectionUnavailable`. Closing the pool closes every client: stdin closed, a grace period,
then the child's whole process group is killed (the SDK's stdio shutdown, shielded from
cancellation). Stdio children start in bounded batches: at most `start_limit` at once
(`connections/client/_session_runner.py`). Account connections are not pooled here: `Broker` routes them to
`AccountConnections`. See docs/clients.md.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp_types as mt

from .._exceptions import (
    ClientError,
    ConnectionsError,
    ConnectionUnavailable,
    UnknownConnection,
    UnknownTool,
    UpstreamError,
    UpstreamTimeout,
)
from ..client._clients import OpenedClient, list_all_tools
from ..client._listing_cache import DEFAULT_LISTING_TTL, ListingCache
from ..client._passthrough import UpstreamResult
from ..client._restart import RestartPolicy, RestartState
from ..client._session_runner import CLOSE_GRACE, ConnectionStatus, OpenSettings, PooledSession, SessionSlot
from ..client._tasks import TASK_METHODS, start_task_json, task_request_json
from ..client._tool_results import call_upstream_tool
from ..client._translate import Operation, describe
from ..client._warm import WarmProgress
from ..client._wire import SdkWire
from ..project._definitions import ConnectionDefinition
from ._deadlines import AnyioDeadline, deadline_for_this_loop
from ._failures import settle_failure

__all__ = ["AuthFor", "ClientPool"]

logger = logging.getLogger(__name__)

AuthFor = Callable[[ConnectionDefinition], "httpx2.Auth | None"]
"""Returns the `httpx2.Auth` for an HTTP/SSE connection (the host OAuth provider), or None."""

_T = TypeVar("_T")
_LACKS_TOOL_BUDGET = 5.0


def default_start_limit() -> int:
    """How many stdio children start at once by default: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class ClientPool:
    """Lazily opened, shared upstream sessions for a project's connections (static headers only).

    Use as `async with ClientPool(connections, environ=..., auth_for=...) as pool`. Enter and leave
    it in one task (the app's lifespan); call its methods from any task. `fast_calls=False` keeps
    every `tools/call` and `tools/list` on the SDK's transport (docs/clients.md). At most
    `start_limit` stdio children start at once (default: the number of cores); the others queue, and
    each one's connect timeout counts from its own start.
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
        fast_calls: bool = True,
        start_limit: int | None = None,
    ) -> None:
        if start_limit is not None and start_limit < 1:
            raise ValueError(f"start_limit must be at least 1, got {start_limit}")
        self._policy = restart_policy or RestartPolicy()
        self._slots: dict[str, SessionSlot] = {}
        for defn in connections.values():
            self.add(defn)
        # False keeps every pooled tools/call on the SDK transport (`serve --no-fast-calls`, docs/clients.md).
        self._settings = OpenSettings(
            environ=dict(os.environ) if environ is None else environ,
            auth_for=auth_for,
            child_env=dict(child_env or {}),
            fast_calls=fast_calls,
            start_limiter=anyio.CapacityLimiter(start_limit or default_start_limit()),
        )
        self._cache = ListingCache(listing_ttl)
        self._tg: anyio.abc.TaskGroup | None = None
        self._deadline: Callable[[float], AbstractAsyncContextManager[Any]] = AnyioDeadline
        """Every operation's budget (`_operate`): one mechanism, chosen for the event loop at `__aenter__`."""
        self._closed = False
        self.warming: WarmProgress | None = None
        """`warm()`'s progress (None when it was not called)."""

    async def __aenter__(self) -> ClientPool:
        if self._tg is not None or self._closed:
            raise RuntimeError("a ClientPool is entered once")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._deadline = deadline_for_this_loop()
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
        for slot in self._slots.values():
            slot.closing = True
            if slot.session is not None:
                slot.session.stopping = True
                slot.session.wake.set()
                if slot.session.opened is None and slot.session.opening is not None:
                    # Ctrl-C during a connect to a server that never answers: stop now, not at the
                    # connect timeout (a stdio child's shutdown stays shielded inside the SDK).
                    slot.session.opening.cancel()
        # Every runner closes its own client in parallel; a stdio child's shutdown is shielded
        # inside the SDK, so a cancelled owner (Ctrl-C of `serve`) still stops every child.
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE):
            for slot in self._slots.values():
                if slot.session is not None:
                    await slot.session.finished.wait()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)

    def names(self) -> list[str]:
        """Every connection's name, sorted."""
        return sorted(self._slots)

    def serves(self, name: str) -> bool:
        return name in self._slots

    def add(self, defn: ConnectionDefinition) -> None:
        """Add a connection the pool did not start with (an account's hub connectors); a known name is kept.

        Raises `ValueError` for an account connection (`AccountConnections` serves those).
        """
        if defn.kind == "account":
            raise ValueError(f"connection {defn.name!r} is an account connection: AccountConnections serves it")
        if defn.name not in self._slots:
            self._slots[defn.name] = SessionSlot(defn, RestartState(self._policy))

    def warm(self) -> None:
        """Start opening every connection now, in the background (`serve --warm`); failures wait for a use.

        The children start in bounded batches like any first use; a use meanwhile waits for the same open.
        """
        if self._closed or self._tg is None:
            raise RuntimeError("warm() needs an entered, open ClientPool")
        progress = self.warming = WarmProgress(total=len(self._slots))
        for slot in self._slots.values():
            self._tg.start_soon(self._warm_one, slot, progress, name=f"mcp-warm:{slot.defn.name}")

    async def _warm_one(self, slot: SessionSlot, progress: WarmProgress) -> None:
        try:
            await self._acquire(slot)
        except ConnectionsError as exc:
            # Told again, in full, to the first use; here only that the warm start failed.
            logger.warning("connection %r: warm start failed (%s)", slot.defn.name, exc.code)
            progress.record(slot.defn.name, ok=False)
        else:
            progress.record(slot.defn.name, ok=True)

    def definition(self, name: str) -> ConnectionDefinition:
        """The definition of `name`. Raises `UnknownConnection`."""
        return self._slot(name).defn

    @property
    def listing_cache(self) -> ListingCache:
        """The listing cache (its `hits` and `misses` counters feed the gateway's metrics)."""
        return self._cache

    def status(self, name: str) -> ConnectionStatus:
        """Where `name` stands: idle, opening, open or paused, with its open and failure counts."""
        return self._slot(name).status()

    def restart(self, name: str) -> None:
        """Close `name`'s session (a stdio child is stopped) and forget its counted failures and pause:
        the next use opens it anew (an operator's restart, docs/console.md). Raises `UnknownConnection`."""
        slot = self._slot(name)
        if slot.session is not None:
            slot.retire(slot.session, self._cache)  # no cause: an operator's restart is not a failure
        slot.restarts = RestartState(self._policy)
        slot.open_failed_at = -math.inf
        slot.operator_restart = slot.opens > 0
        self._cache.invalidate(name)

    def redefine(self, connections: Mapping[str, ConnectionDefinition]) -> list[str]:
        """Take a reloaded project's definitions (`serve`'s reload): a connection whose definition is unchanged
        keeps its session (its new definition object taken); a changed one is closed (a stdio child stopped)
        and opens with its new definition at its next use; a removed one is closed and forgotten; a new one is
        added. Returns the names closed, sorted."""
        closed: list[str] = []
        for name, slot in list(self._slots.items()):
            defn = connections.get(name)
            if defn is not None and defn == slot.defn:
                slot.defn = defn
                continue
            closed.append(name)
            if slot.session is not None:
                slot.retire(slot.session, self._cache)  # its runner closes the client, a stdio child stops
            self._cache.invalidate(name)
            del self._slots[name]  # a changed one starts afresh (`add`): no failures or pause carried over
        for defn in connections.values():
            self.add(defn)
        return sorted(closed)

    async def list_tools(self, name: str, *, use_cache: bool = False) -> list[mt.Tool]:
        """`tools/list` (all pages) with the allow/deny lists applied, under the `list` timeout.

        `use_cache=True` answers from the listing cache when a fresh entry exists (connections
        without an `auth` callback only). Raises `UnknownConnection`, `UpstreamError`,
        `UpstreamTimeout`, `ConnectionUnavailable`, `EnvironmentVariableMissing`.
        """
        slot = self._slot(name)
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

    async def call_tool(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """`tools/call` under the `call` timeout; the result as JSON, an `isError` one returned.

        Raises `UnknownConnection`, `UnknownTool` (hidden by allow/deny, or absent upstream),
        `UpstreamError`, `UpstreamTimeout`, `ConnectionUnavailable`, `EnvironmentVariableMissing`.
        """
        return (await self.call_tool_upstream(name, tool, arguments)).result

    async def call_tool_upstream(self, name: str, tool: str, arguments: Mapping[str, Any] | None) -> UpstreamResult:
        """`call_tool`, the result as the upstream session gave it: JSON checked once, its protocol version,
        and its bytes where the wire kept them and nothing changed them (`UpstreamResult.answer` splices them
        into a peer's answer: `client/_passthrough.py`). Raises as `call_tool`."""
        slot = self._slot(name)
        args = self._call_arguments(slot, tool, arguments)
        cap = slot.defn.min_log_level

        def run(opened: OpenedClient) -> Awaitable[UpstreamResult]:
            return call_upstream_tool(opened.client, opened.wire or SdkWire(opened.client.session), tool, args, cap)

        result = await self._call(slot, tool, run)
        if result.result.get("isError") and await self._lacks_tool(name, tool):
            raise UnknownTool(name, tool)
        return result

    async def start_tool_task(
        self, name: str, tool: str, arguments: Mapping[str, Any] | None, task: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A task-augmented `tools/call` (`client/_tasks.py`): the `CreateTaskResult` as JSON (or the `CallToolResult`
        of an upstream that ran it at once). Raises as `call_tool` does."""
        slot = self._slot(name)
        args = self._call_arguments(slot, tool, arguments)
        return await self._call(slot, tool, lambda opened: start_task_json(opened.client, tool, args, task))

    async def task_request(self, name: str, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`tasks/get`, `tasks/result`, `tasks/cancel` or `tasks/list` on `name`'s pooled session (where its
        tasks live), under the `call` timeout; the answer as JSON. Raises as `call_tool` does (`ValueError`
        for another method)."""
        if method not in TASK_METHODS:
            raise ValueError(f"{method!r} is not a task request (one of {', '.join(sorted(TASK_METHODS))})")
        operation: Operation = method  # pyright: ignore[reportAssignmentType]  # one of TASK_METHODS, checked above
        return await self.request(name, operation, lambda opened: task_request_json(opened.client, method, params))

    async def request(self, name: str, operation: Operation, run: Callable[[OpenedClient], Awaitable[_T]]) -> _T:
        """`run` on `name`'s pooled session as `operation` (resources, prompts, completion: `pool/_offer_calls.py`),
        under the `list` timeout for a listing and the `call` timeout otherwise; errors as for `call_tool`."""
        slot = self._slot(name)
        budget = slot.defn.timeouts.list if operation.endswith("/list") else slot.defn.timeouts.call
        return await self._operate(slot, operation, run, budget)

    # -- internals --------------------------------------------------------------------------

    @staticmethod
    def _call_arguments(slot: SessionSlot, tool: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        if not slot.defn.allows_tool(tool):
            raise UnknownTool(
                slot.defn.name, tool, f"tool {tool!r} is not allowed by the connection's allow/deny lists"
            )
        return dict(arguments or {})

    def _call(self, slot: SessionSlot, tool: str, run: Callable[[OpenedClient], Awaitable[_T]]) -> Awaitable[_T]:
        # A plain function handing back `_operate`'s coroutine: no frame of its own on the hot path.
        return self._operate(slot, "call", run, slot.defn.timeouts.call, tool=tool)

    def _slot(self, name: str) -> SessionSlot:
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
                tools = await self._known_tools(name)
            except ConnectionsError:
                return False
        return tools is not None and all(t.name != tool for t in tools)

    def _known_tools(self, name: str) -> Awaitable[list[mt.Tool]]:
        """The listing `_lacks_tool` checks: the cached one when fresh (the identity pool lists as the caller)."""
        return self.list_tools(name, use_cache=True)

    async def _operate(
        self,
        slot: SessionSlot,
        operation: Operation,
        run: Callable[[OpenedClient], Awaitable[_T]],
        budget: float,
        *,
        tool: str | None = None,
    ) -> _T:
        """`run` on the slot's session within `budget`, as `operation`; errors translated to `ConnectionsError`s.

        A failed call (an `UpstreamError`) whose tool the upstream's listing lacks is `UnknownTool`; what any
        other failure becomes (a retry on a new session, or an error) is `_failures.settle_failure`'s.
        """
        try:
            for attempt in (1, 2):
                session = slot.session
                if session is not None and session.usable and session.opened is not None and not self._closed:
                    opened = session.opened  # the hot path: no lock, no extra frame
                else:
                    session, opened = await self._acquire(slot)
                try:
                    async with self._deadline(budget):
                        result = await run(opened)
                    slot.restarts.recovered()
                    return result
                except ClientError:
                    raise
                except TimeoutError:
                    doing = describe(operation, tool)
                    raise UpstreamTimeout(slot.defn.name, f"{doing} timed out after {budget:g}s") from None
                except Exception as exc:
                    first = attempt == 1
                    error = await settle_failure(
                        slot, session, opened, exc, operation, tool, self._cache, first_attempt=first
                    )
                    if error is None:
                        continue
                    raise error from None
            raise AssertionError("unreachable")  # pragma: no cover
        except UpstreamError:
            if tool is None or not await self._lacks_tool(slot.defn.name, tool):
                raise
            raise UnknownTool(slot.defn.name, tool) from None

    def _acquire(self, slot: SessionSlot) -> Awaitable[tuple[PooledSession, OpenedClient]]:
        if self._closed or self._tg is None:
            raise ConnectionUnavailable(slot.defn.name, "the client pool is closed (or was never entered)")
        return slot.acquire(self._tg, self._settings, self._cache)
