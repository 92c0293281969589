"""`Metrics`: what `GET /v1/metrics` serves, in the Prometheus text format (`prometheus_client`).

Counted as things happen: tool calls by connection, tool and outcome, their errors by code and
their latency (a histogram), HTTP requests by route template, method and status (`http_observer`),
turns by outcome, auth refusals by status and code. Read from the broker when scraped: pool
sessions open, each connection's state, upstream session restarts, listing-cache hits and misses,
OAuth refreshes and refresh failures, tools held back by `mcp.lock`; from the token store, the seconds until each OAuth
connection's stored access token expires (never a token). Also `process_*` (this process),
`python_info` and `agent_sdk_build_info`. One `Metrics` per app (its own registry), never a
module-level singleton. No `_created` series unless `AGENT_SDK_METRICS_CREATED=1` (it is a
process-wide switch of `prometheus_client`).

Several processes on one host: with `PROMETHEUS_MULTIPROC_DIR` set (an empty folder, before the
processes start, as `prometheus_client` requires), the counted metrics go through its
multiprocess files and each process's `/v1/metrics` answers the sum over all of them; the values
read from a broker stay per process and carry a `pid` label then. Without it every process is its
own scrape target.
"""

from __future__ import annotations

import hashlib
import logging
import os
import platform
import secrets
import socket
import time
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connections import ConnectionDefinition, ConnectionsError, ToolInputError, TurnProblem, TurnTool
from oauth import OAuthError, StoreKey, TokenStore

from .auth.roles import require_operator
from .errors import ApiError
from .http.json_answers import error_response
from .runtime import principal_of

__all__ = ["BUCKETS", "REPLICA_HEADER", "Metrics", "metrics_routes", "replica_id"]

_tools_log = logging.getLogger("agent_sdk.tools")

# From 100 µs (an authored tool, a cached listing) to the 120 s default call budget.
BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
)  # fmt: skip
CONNECTION_STATES = ("idle", "queued", "opening", "open", "failing", "paused", "needs_login")
"""`agent_sdk_connection_state`'s `state` values: the pool's (`needs_login`: waiting for an OAuth login, not
crashing), and `failing` (idle, its last open failed)."""


REPLICA_HEADER = "agent-sdk-replica"
_BOOT = secrets.token_hex(6)


def replica_id() -> str:
    """Names whose counters a `/v1/metrics` answer holds: this process (a random id per start), or with
    `PROMETHEUS_MULTIPROC_DIR` every process sharing that folder on this host (they answer the same sums).
    Opaque: no host name, no pid."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if folder:
        return hashlib.sha256(f"{socket.gethostname()}\0{os.path.abspath(folder)}".encode()).hexdigest()[:12]
    return _BOOT


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def _failure_code(exc: Exception) -> str:
    if isinstance(exc, ToolInputError):
        return "invalid_tool_input"
    if isinstance(exc, ConnectionsError):
        return exc.code
    return "tool_failed"


class _BrokerCollector(Collector):
    """Reads the broker's own counters at scrape time: nothing is counted twice."""

    def __init__(self, broker: Any, pid_label: bool) -> None:
        self.broker = broker
        self.pid = str(os.getpid()) if pid_label else None

    def collect(self) -> Iterable[Metric]:
        extra = ["pid"] if self.pid else []
        tail = [self.pid] if self.pid else []
        pool = getattr(self.broker, "pool", None)
        sessions = GaugeMetricFamily(
            "agent_sdk_pool_sessions_open", "Upstream sessions the client pool holds open", labels=extra
        )
        restarts = CounterMetricFamily(
            "agent_sdk_upstream_restarts",
            "Upstream sessions reopened after the first (a stdio child restarted, a dropped session reopened)",
            labels=["connection", *extra],
        )
        hits = CounterMetricFamily(
            "agent_sdk_listing_cache_hits", "tools/list answered from the listing cache", labels=["connection", *extra]
        )
        misses = CounterMetricFamily(
            "agent_sdk_listing_cache_misses", "tools/list that had to ask the upstream", labels=["connection", *extra]
        )
        refreshes = CounterMetricFamily(
            "agent_sdk_oauth_refreshes", "OAuth access tokens refreshed", labels=["connection", *extra]
        )
        refresh_failures = CounterMetricFamily(
            "agent_sdk_oauth_refresh_failures",
            "OAuth refreshes that failed (the token endpoint refused the grant, did not answer, or was unreachable)",
            labels=["connection", *extra],
        )
        states = GaugeMetricFamily(
            "agent_sdk_connection_state",
            "Each pooled connection's state: 1 for the one it is in, 0 for the others",
            labels=["connection", "state", *extra],
        )
        if pool is not None:
            open_count = 0
            for name in sorted(getattr(pool, "names", list)()):
                status = pool.status(name)
                open_count += status.state == "open"
                restarts.add_metric([name, *tail], max(status.opens - 1, 0))
                now = "failing" if status.state == "idle" and status.last_error is not None else status.state
                for state in CONNECTION_STATES:
                    states.add_metric([name, state, *tail], float(state == now))
            sessions.add_metric(tail, open_count)
            cache = pool.listing_cache
            for name, count in sorted(cache.hits.items()):
                hits.add_metric([name, *tail], count)
            for name, count in sorted(cache.misses.items()):
                misses.add_metric([name, *tail], count)
        for name, count in sorted(getattr(self.broker, "oauth_refreshes", dict)().items()):
            refreshes.add_metric([name, *tail], count)
        for name, count in sorted(getattr(self.broker, "oauth_refresh_failures", dict)().items()):
            refresh_failures.add_metric([name, *tail], count)
        return [
            sessions,
            states,
            restarts,
            hits,
            misses,
            refreshes,
            refresh_failures,
            *self._identities(extra, tail),
            *self._pins(extra, tail),
        ]

    def _pins(self, extra: list[str], tail: list[str]) -> list[Metric]:
        """Per pinned connection: the tools its latest listing holds back because they differ from mcp.lock."""
        held = GaugeMetricFamily(
            "agent_sdk_pinned_tools_quarantined",
            "Tools held back because the upstream's definition differs from mcp.lock (changed, new or renamed)",
            labels=["connection", *extra],
        )
        pins = getattr(self.broker, "pins", None)
        if pins is not None:
            for name, count in sorted(pins.quarantined().items()):
                held.add_metric([name, *tail], count)
        return [held]

    def _identities(self, extra: list[str], tail: list[str]) -> list[Metric]:
        """Per `auth` connection: identities kept and closed. Counts only: never a digest, never a header."""
        live = GaugeMetricFamily(
            "agent_sdk_identity_clients",
            "Identities (per-session auth header sets) an auth connection keeps a client for",
            labels=["connection", *extra],
        )
        closed = CounterMetricFamily(
            "agent_sdk_identity_clients_closed",
            "Identity clients closed: evicted by max_identities, idle, rotated away or released by their session",
            labels=["connection", *extra],
        )
        identities = getattr(self.broker, "identities", None)
        if identities is not None:
            for name in identities.names():
                counts = identities.identity_counts(name)
                live.add_metric([name, *tail], counts.live)
                closed.add_metric([name, *tail], counts.closed)
        return [live, closed]


class _StaticCollector(Collector):
    """`agent_sdk_build_info` and the OAuth token expiry (`Metrics.read_tokens` fills it before a scrape)."""

    def __init__(self) -> None:
        self.expires_at: dict[str, float | None] = {}
        self.grants: dict[str, int] = {}
        self.build = {
            "version": _package_version("agent-sdk"),
            "mcp": _package_version("mcp"),
            "python": platform.python_version(),
        }

    def collect(self) -> Iterable[Metric]:
        build = GaugeMetricFamily(
            "agent_sdk_build_info",
            "The running agent-sdk: its version, the mcp SDK's and Python's",
            labels=list(self.build),
        )
        build.add_metric(list(self.build.values()), 1)
        expiry = GaugeMetricFamily(
            "agent_sdk_oauth_token_expires_in_seconds",
            "Seconds until the stored OAuth access token of a connection expires (negative: expired)",
            labels=["connection"],
        )
        now = time.time()
        for name, at in sorted(self.expires_at.items()):
            if at is not None:
                expiry.add_metric([name], round(at - now, 3))
        grants = GaugeMetricFamily(
            "agent_sdk_oauth_grants",
            "OAuth grants stored for a connection: its one grant (1 or 0), or with grants='per_principal' the "
            "number of principals that signed in (never who)",
            labels=["connection"],
        )
        for name, count in sorted(self.grants.items()):
            grants.add_metric([name], count)
        return [build, expiry, grants]


class Metrics:
    """The gateway's metrics. `call_finished` is the turn builder's `CallObserver`."""

    def __init__(self) -> None:
        multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        if os.environ.get("AGENT_SDK_METRICS_CREATED") == "1":
            enable_created_metrics()
        else:
            disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=True)
        # In multiprocess mode the counted metrics live in files shared by the host's processes and are
        # read back through MultiProcessCollector; otherwise they register here directly.
        counted = None if multiprocess else self.registry
        if multiprocess:
            MultiProcessCollector(self.registry)
        # Per process in both modes: in multiprocess mode, the one that answered the scrape.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._static = _StaticCollector()
        self.registry.register(self._static)
        self.tool_calls = Counter(
            "agent_sdk_tool_calls",
            "Tool calls by connection ('' for authored tools), tool and outcome (ok, is_error, failed)",
            ["connection", "tool", "outcome"],
            registry=counted,
        )
        self.tool_errors = Counter(
            "agent_sdk_tool_call_errors",
            "Tool calls that raised, by error code (upstream_error, upstream_timeout, tool_failed, ...)",
            ["connection", "tool", "code"],
            registry=counted,
        )
        self.tool_seconds = Histogram(
            "agent_sdk_tool_call_duration_seconds",
            "Tool call latency as the gateway saw it",
            ["connection", "tool"],
            buckets=BUCKETS,
            registry=counted,
        )
        self.http_seconds = Histogram(
            "agent_sdk_http_request_duration_seconds",
            "HTTP requests by route template (never the raw path), method and status, until the answer's last byte",
            ["route", "method", "status"],
            buckets=BUCKETS,
            registry=counted,
        )
        self.turns = Counter(
            "agent_sdk_turns", "Finished turns by outcome (completed, failed, cancelled, interrupted)", ["outcome"],
            registry=counted,
        )  # fmt: skip
        self.listing_failures = Counter(
            "agent_sdk_connection_listing_failures",
            "Connections left out of a toolset (a turn, a catalog, a tools/list, a direct call) by cause",
            ["connection", "code"],
            registry=counted,
        )
        self.refusals = Counter(
            "agent_sdk_auth_refusals", "Requests refused by the auth chain, by status and code", ["status", "code"],
            registry=counted,
        )  # fmt: skip
        self.counted = counted
        """The registry the counted metrics register in (None in multiprocess mode: prometheus_client's files)."""
        self._multiprocess = multiprocess
        self._watched: _BrokerCollector | None = None
        # The labelled children each call and request counts into, by their labels: `labels()` costs more
        # than the `inc`/`observe` itself (argument checks, a lock) and the label sets are few (tools, routes).
        self._call_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._http_children: dict[tuple[str, str, int], Any] = {}

    def watch(self, broker: Any) -> None:
        """Read `broker`'s pool and OAuth counters at every scrape (the app's lifespan calls this)."""
        if self._watched is not None:
            self.registry.unregister(self._watched)
        self._watched = _BrokerCollector(broker, pid_label=self._multiprocess)
        self.registry.register(self._watched)

    def call_finished(self, tool: TurnTool, seconds: float, failure: Exception | None, is_error: bool) -> None:
        """Count one tool call; log it once when it raised (never its arguments)."""
        connection = tool.connection or ""
        outcome = "failed" if failure is not None else ("is_error" if is_error else "ok")
        key = (connection, tool.name, outcome)
        children = self._call_children.get(key)
        if children is None:
            children = self._call_children[key] = (
                self.tool_calls.labels(connection, tool.name, outcome),
                self.tool_seconds.labels(connection, tool.name),
            )
        children[0].inc()
        children[1].observe(seconds)
        if failure is None:
            return
        code = _failure_code(failure)
        self.tool_errors.labels(connection, tool.name, code).inc()
        # Our own errors are secret-free sentences; a tool body's exception text is user data: type only
        # (AGENT_SDK_DEBUG=1 adds the traceback).
        detail = str(failure) if isinstance(failure, ConnectionsError) else type(failure).__name__
        _tools_log.warning(
            "tool call %r failed: %s: %s",
            tool.name,
            code,
            detail,
            exc_info=failure if os.environ.get("AGENT_SDK_DEBUG") == "1" else None,
            extra={"event": "tool_failed", "connection": tool.connection, "tool": tool.name, "code": code},
        )

    def http_finished(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        child = self._http_children.get(key)
        if child is None:
            child = self._http_children[key] = self.http_seconds.labels(route, method, str(status))
        child.observe(seconds)

    async def read_tokens(self, store: TokenStore, connections: Mapping[str, ConnectionDefinition]) -> None:
        """Note when each OAuth connection's stored access token expires, and how many grants it has (a store it
        cannot read: none)."""
        expires: dict[str, float | None] = {}
        try:
            held = await store.keys()
        except OAuthError:
            held = []
        grants: dict[str, int] = {}
        for name, defn in connections.items():
            if defn.oauth is None or defn.url is None:
                continue
            own = [k for k in held if k.connection == name and k.resource == defn.url]
            grants[name] = sum(1 for k in own if bool(k.principal) == (defn.grants == "per_principal"))
            if defn.grants == "per_principal":
                continue  # one expiry per principal would name them: the count is what an operator sees
            try:
                grant = await store.load(StoreKey(name, defn.url))
            except OAuthError:
                grant = None
            tokens = grant.tokens if grant is not None else None
            expires[name] = tokens.expires_at if tokens is not None else None
        self._static.expires_at = expires
        self._static.grants = grants

    def listing_failed(self, problems: list[TurnProblem]) -> None:
        """Count each connection a toolset was built without, by its cause (the builder's `CallObserver`)."""
        for problem in problems:
            self.listing_failures.labels(problem.connection or "", problem.code).inc()

    def turn_finished(self, status: str) -> None:
        self.turns.labels(status).inc()

    def refused(self, status: int, code: str) -> None:
        self.refusals.labels(str(status), code).inc()

    def render(self, names: list[str] | None = None) -> bytes:
        """The text format; with `names`, only those samples (`prometheus_client`'s `name[]` filter)."""
        return generate_latest(self.registry.restricted_registry(names) if names else self.registry)


async def _metrics(request: Request) -> Response:
    try:
        if principal_of(request).kind != "metrics":  # a scrape credential reads this route only
            require_operator(request)  # the counts name every principal's connections and tools
    except ApiError as exc:
        return error_response(exc)
    metrics: Metrics = request.state.metrics
    console = getattr(request.state, "console", None)
    runtime = getattr(request.state, "runtime", None)
    if console is not None and runtime is not None:
        await metrics.read_tokens(console.store, runtime.project.connections)
    # The console keeps one series per replica behind a load balancer (docs/console.md#replicas).
    names = request.query_params.getlist("name[]")  # as prometheus_client's own handler: only these samples
    return Response(metrics.render(names), media_type=CONTENT_TYPE_LATEST, headers={REPLICA_HEADER: replica_id()})


def metrics_routes() -> list[Route]:
    """`GET /v1/metrics`: operators only (`gateway/auth/roles.py`), or a `--metrics-token` that opens this route and no
    other (`gateway/auth/scrape_token.py`)."""
    return [Route("/v1/metrics", _metrics, methods=["GET"])]
