"""Open one MCP client for a connection definition: stdio, Streamable HTTP or legacy SSE.

`open_client` is the one place that turns a `ConnectionDefinition` into a live `mcp.Client`:
header and env `${VAR}`s are expanded here (at open time, never at load time), the child of a
stdio connection gets a minimal inherited environment plus the definition's `env`, and HTTP
connections get one `httpx2.AsyncClient` carrying the static headers and an optional
`httpx2.Auth` (the OAuth provider plugs in there).

`connections/client/_translate.py` maps what it raises.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import httpx2
import mcp_types as mt
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types.version import LATEST_MODERN_VERSION

from .._exceptions import ConnectionUnavailable
from ..project._definitions import ConnectionDefinition
from ..project._expand import expand_args, expand_map
from ._call_routing import SessionLogs, session_logs
from ._fast_calls import FastCalls, fast_calls_apply, install_fast_calls
from ._identity import HeadersPerCall, IdentityAuth
from ._input_requests import client_callbacks
from ._keepalive import DrainingTransport
from ._sandbox import stdio_child
from ._tool_results import holds_long_text
from ._tracing import TracedDispatcher, Upstream, tracing_enabled
from ._transports._http1 import shared_ssl_context
from ._transports._http1_connection import IDLE_REUSE_S
from ._transports._stdio import StdioChild
from ._wire import SdkWire, Wire

__all__ = [
    "INHERITED_ENV",
    "LIST_PAGE_CAP",
    "STDERR_LOGGER",
    "OpenedClient",
    "client_mode",
    "list_all_tools",
    "merge_headers",
    "open_client",
]

INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ")
"""What a stdio child inherits from the gateway's environment; the definition's `env` goes on top.

The SDK's own set (HOME, LOGNAME, PATH, SHELL, TERM, USER) plus locale, temp dir and time zone,
so a child prints and stores text as the gateway does. Nothing else leaks: API keys in the
gateway's environment reach a child only through `env={"KEY": "${KEY}"}` in its definition."""

LIST_PAGE_CAP = 100
"""A `tools/list` walk stops after this many pages: a paginator that never ends cannot hang a turn."""

OnMessage = Callable[[IncomingMessage], Any]

_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=IDLE_REUSE_S)
"""httpx2's pool defaults, but an idle connection is not reused as long as a server keeps it (`IDLE_REUSE_S`)."""


@dataclass(slots=True)
class OpenedClient:
    """A live client and what the pool needs to know about it."""

    client: Client
    gone: anyio.Event = field(default_factory=anyio.Event)
    """Set when the transport ended (the child exited, the SSE stream dropped): do not reuse it."""
    http_status: list[int] = field(default_factory=list[int])
    """The last HTTP error status seen on this client (for error messages; empty for stdio)."""
    child: StdioChild | None = None
    """The stdio child process (None for HTTP and SSE)."""
    wire: Wire | None = None
    """What the pool's requests go out on (`client/_wire.py`): the fast wire, or the session's own dispatcher."""
    fast: FastCalls | None = None
    """The session's fast wire (`connections/client/_fast_calls.py`), when `tools/call` and `tools/list` go over it."""
    session_ids: list[str] = field(default_factory=list[str])
    """The `Mcp-Session-Id` the server gave at `initialize` (empty: a session-less server, or stdio)."""

    @property
    def fast_calls(self) -> bool:
        """`tools/call` and `tools/list` go over the fast wire instead of the SDK transport."""
        return self.fast is not None and self.fast.on

    @property
    def session_id(self) -> str | None:
        return self.session_ids[0] if self.session_ids else None

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version

    @property
    def alive(self) -> bool:
        """False once the transport ended or the stdio child exited."""
        return not self.gone.is_set() and (self.child is None or self.child.alive)


def merge_headers(static: Mapping[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
    """`extra` over `static`, case-insensitively (HTTP header names are case-insensitive, RFC 9110 §5.1)."""
    merged: dict[str, tuple[str, str]] = {k.lower(): (k, v) for k, v in static.items()}
    for key, value in (extra or {}).items():
        merged[key.lower()] = (key, value)
    return dict(merged.values())


def client_mode(defn: ConnectionDefinition, learned: str | None = None) -> str:
    """The `mcp.Client(mode=...)` for a definition: `legacy`, `auto` or a modern version pin.

    `learned` is what an earlier `auto` open settled on, so a restart skips the probe. Legacy SSE
    is a handshake-era transport (2024-11-05): it always opens with the `initialize` handshake.
    """
    if defn.kind == "sse" or defn.protocol == "legacy":
        return "legacy"
    if defn.protocol == "modern":
        return LATEST_MODERN_VERSION
    return learned or "auto"


def child_environment(defn: ConnectionDefinition, environ: Mapping[str, str]) -> dict[str, str]:
    """The stdio child's whole environment: `INHERITED_ENV` from `environ`, then the definition's `env`."""
    base = {k: environ[k] for k in INHERITED_ENV if k in environ and not environ[k].startswith("()")}
    return base | expand_map(defn.name, "env", defn.env, environ)


def _bridged(defn: ConnectionDefinition) -> bool:
    """Whether the gateway's own variables (the account bridge's) reach this stdio child: opt-in, never linkable."""
    return defn.bridge and not defn.linkable


@asynccontextmanager
async def open_client(
    defn: ConnectionDefinition,
    *,
    headers: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    auth: httpx2.Auth | None = None,
    on_message: OnMessage | None = None,
    mode: str | None = None,
    http_status: list[int] | None = None,
    child_env: Mapping[str, str] | None = None,
    fast_calls: bool = False,
    headers_per_call: bool = False,
) -> AsyncGenerator[OpenedClient]:
    """Open one MCP session for `defn`; close it (and stop a stdio child) when the block ends.

    `headers` are merged over the definition's static headers. No timeout is applied here: the
    caller bounds the open with its own cancel scope (`Timeouts.connect`). `http_status` (if
    given) receives the last HTTP error status, also when the open itself fails. `child_env` goes
    over a stdio child's environment last, and only for a `bridge=True` definition that is not
    linkable (the account bridge's URL and secret: opt-in, never for what accounts reach).
    `fast_calls=True` sends `tools/call` and `tools/list` over the fast wire where it applies (`client/_fast_calls.py`);
    the pool asks for it. `headers_per_call=True`: `auth` only adds an identity's headers, and the fast
    wire gets those with each call instead of running it (`connections/pool/_identity_pool.py`).

    Raises `EnvironmentVariableMissing` for an unset `${VAR}`, `ConnectionUnavailable` for an
    account connection, and whatever the transport raises (map it with `translate`).
    """
    env_source: Mapping[str, str] = os.environ if environ is None else environ

    async def handler(message: IncomingMessage) -> None:
        if on_message is not None:
            await on_message(message)
        else:
            await anyio.lowlevel.checkpoint()

    if defn.kind == "account":
        raise ConnectionUnavailable(defn.name, "account connections are reached through the account bridge")
    gone = anyio.Event()
    status: list[int] = [] if http_status is None else http_status
    children: list[StdioChild] = []
    session_ids: list[str] = []
    all_headers: dict[str, str] = {}
    if defn.kind == "stdio":
        assert defn.command is not None
        transport: AbstractAsyncContextManager[Any] = stdio_child(
            defn,
            expand_args(defn.name, defn.args, env_source),
            env=child_environment(defn, env_source) | (dict(child_env or {}) if _bridged(defn) else {}),
            on_spawn=children.append,
            on_stderr=_child_stderr(defn.name),
        )
    else:
        assert defn.url is not None
        all_headers = merge_headers(expand_map(defn.name, "header", defn.headers, env_source), headers)

        async def on_response(response: httpx2.Response) -> None:
            status[:] = [response.status_code]  # every answer's: an error names the status it came with
            if session_id := response.headers.get("mcp-session-id"):
                session_ids[:] = [session_id]  # what the SDK transport keeps from the initialize answer

        def factory(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            # Per-operation deadlines come from the definition (fail_after); httpx2 only bounds the
            # TCP connect, so a held-open SSE/GET stream is never cut by a read timeout.
            return httpx2.AsyncClient(
                headers=headers,
                auth=auth,
                transport=DrainingTransport(
                    httpx2.AsyncHTTPTransport(verify=shared_ssl_context(), limits=_LIMITS),
                    max_body=defn.max_result_bytes,
                ),
                timeout=httpx2.Timeout(None, connect=defn.timeouts.connect),
                event_hooks={"response": [on_response]},
            )

        if defn.kind == "sse":
            transport = sse_client(
                defn.url, headers=all_headers, auth=auth, httpx_client_factory=factory, sse_read_timeout=math.inf
            )
        else:
            transport = _streamable_http(defn.url, lambda: factory(all_headers, None, auth))
    logs = SessionLogs()
    client = Client(
        _Watched(transport, gone),
        mode=mode or client_mode(defn),
        message_handler=handler,
        logging_callback=logs.on_log,  # a log message that names no request: to its caller (`client/_call_routing.py`)
        cache=None,  # the pool keeps its own listing cache, invalidated by list_changed
        client_info=mt.Implementation(name="agent-sdk", version="0.1.0"),
        # declares elicitation and sampling; each request is its call's (`connections/client/_input_requests.py`)
        **client_callbacks(defn.timeouts.question),
    )
    fast: FastCalls | None = None
    try:
        async with client:
            session_logs(client.session, logs)
            child = children[0] if children else None
            opened = OpenedClient(client=client, gone=gone, http_status=status, child=child, session_ids=session_ids)
            if fast_calls and defn.kind == "http" and fast_calls_apply(defn, all_headers):
                fast = opened.fast = install_fast_calls(
                    client,
                    defn,
                    headers=all_headers,
                    session_id=session_ids[0] if session_ids else None,
                    http_status=status,
                    auth=None if headers_per_call else auth,
                )
            opened.wire = _chosen_wire(client, fast, auth if headers_per_call else None)
            if tracing_enabled():  # outermost: every request this session sends is marked (client/_tracing.py)
                _trace(opened, Upstream(defn.name, "pipe" if defn.kind == "stdio" else "tcp", client.protocol_version,
                                        opened.session_id))  # fmt: skip
            yield opened
    finally:
        if fast is not None:
            await fast.aclose()


def _chosen_wire(client: Client, fast: FastCalls | None, per_call: httpx2.Auth | None) -> Wire:
    """The wire the pool's requests take (`client/_wire.py`): the fast wire where it was installed, an identity's
    headers on each of its calls for a `headers_per_call` client, else the session's own dispatcher."""
    if fast is None:
        return SdkWire(client.session)
    if isinstance(per_call, IdentityAuth):
        # Before anyone sees the session: no fast-wire call ever leaves without its identity.
        wire = HeadersPerCall(fast, per_call)
        client.session._dispatcher = wire  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
        return wire
    return fast


def _trace(opened: OpenedClient, upstream: Upstream) -> None:
    """Mark every request of `opened` for tracing: the session's dispatcher (the SDK's methods, and the
    `SdkWire`), and the fast wire the pool calls directly."""
    session = opened.client.session
    session._dispatcher = TracedDispatcher(session._dispatcher, upstream, fast=opened.fast_calls)  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue]
    if opened.wire is not None and not isinstance(opened.wire, SdkWire):
        opened.wire = TracedDispatcher(opened.wire, upstream, fast=True)


@asynccontextmanager
async def _streamable_http(url: str, make_http: Callable[[], httpx2.AsyncClient]) -> AsyncGenerator[Any]:
    async with make_http() as http, streamable_http_client(url, http_client=http) as streams:
        yield streams


STDERR_LOGGER = "connections.stderr"
"""The logger each line a stdio child writes to its stderr goes to, at INFO, with its `connection`."""

_stderr_log = logging.getLogger(STDERR_LOGGER)


def _child_stderr(name: str) -> Callable[[str], None]:
    # A stdio child's stderr is its own log: each line becomes one record naming the connection, so a
    # JSON log stays all JSON and a text log says whose line it is (gateway/logs.py formats both).
    def line(text: str) -> None:
        _stderr_log.info("%s", text, extra={"event": "upstream_stderr", "connection": name})

    return line


_RELEASE = SessionMessage(mt.JSONRPCNotification(jsonrpc="2.0", method="notifications/agent-sdk/release"))
"""A notification no server sends: the session drops it (unknown method, a debug line)."""


class _WatchedRead:
    """A read stream that sets `gone` when the transport ends (EOF), so the pool stops reusing it.

    The SDK's read loop (`async for item in read_stream`) holds the last message until the next
    one arrives: after a large answer, one payload would stay in memory while the connection is
    idle. So a large answer is followed by `_RELEASE`, which the session drops at once, and the
    answer is freed as soon as its caller is done with it.
    """

    def __init__(self, inner: Any, gone: anyio.Event) -> None:
        self._inner = inner
        self._gone = gone
        self._release = False

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._gone.set()
            raise

    async def aclose(self) -> None:
        self._gone.set()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        # The dispatcher's read loop: one frame over the inner stream, not two.
        if self._release:
            self._release = False
            return _RELEASE
        try:
            item = await self._inner.receive()
            self._release = holds_long_text(getattr(getattr(item, "message", None), "result", None))
            return item
        except anyio.EndOfStream:
            self._gone.set()
            raise StopAsyncIteration from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._gone.set()
            raise

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _Watched:
    """Wrap a transport so that its read stream reports the end of the connection."""

    def __init__(self, inner: AbstractAsyncContextManager[Any], gone: anyio.Event) -> None:
        self._inner = inner
        self._gone = gone

    async def __aenter__(self) -> Any:
        read, write = await self._inner.__aenter__()
        return _WatchedRead(read, self._gone), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._gone.set()
        return await self._inner.__aexit__(exc_type, exc, tb)


async def list_all_tools(defn: ConnectionDefinition, client: Client) -> list[mt.Tool]:
    """Every page of `tools/list`, with the definition's allow/deny lists applied."""
    tools: list[mt.Tool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGE_CAP):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return [t for t in tools if defn.allows_tool(t.name)]
