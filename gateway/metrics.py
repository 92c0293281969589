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
import secrets
import socket
from collections.abc import Mapping
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
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connections import ConnectionDefinition, ConnectionsError, ToolInputError, TurnProblem, TurnTool
from oauth import OAuthError, StoreKey, TokenStore

from .auth.roles import require_operator
from .errors import ApiError
from .http.json_answers import error_response
from .metrics_collectors import BrokerCollector, StaticCollector
from .runtime import principal_of

__all__ = ["BUCKETS", "REPLICA_HEADER", "Metrics", "metrics_routes", "replica_id"]

_tools_log = logging.getLogger("agent_sdk.tools")

# From 100 µs (an authored tool, a cached listing) to the 120 s default call budget.
BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 120.0,
)  # fmt: skip
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


def _failure_code(exc: Exception) -> str:
    if isinstance(exc, ToolInputError):
        return "invalid_tool_input"
    if isinstance(exc, ConnectionsError):
        return exc.code
    return "tool_failed"


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
        self._static = StaticCollector()
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
        self._watched: BrokerCollector | None = None
        # The labelled children each call and request counts into, by their labels: `labels()` costs more
        # than the `inc`/`observe` itself (argument checks, a lock) and the label sets are few (tools, routes).
        self._call_children: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self._http_children: dict[tuple[str, str, int], Any] = {}

    def watch(self, broker: Any) -> None:
        """Read `broker`'s pool and OAuth counters at every scrape (the app's lifespan calls this)."""
        if self._watched is not None:
            self.registry.unregister(self._watched)
        self._watched = BrokerCollector(broker, pid_label=self._multiprocess)
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
