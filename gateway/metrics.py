"""`Metrics`: what `GET /v1/metrics` serves, in the Prometheus text format (`prometheus_client`).

Counted as things happen: tool calls by connection, tool and outcome, their errors by code and
their latency (a histogram), turns by outcome, auth refusals by status and code. Read from the
broker when scraped: pool sessions open, upstream session restarts, listing-cache hits and misses,
OAuth refreshes. One `Metrics` per app (its own registry), never a module-level singleton.

Several processes on one host: with `PROMETHEUS_MULTIPROC_DIR` set (an empty folder, before the
processes start, as `prometheus_client` requires), the counted metrics go through its
multiprocess files and each process's `/v1/metrics` answers the sum over all of them; the values
read from a broker stay per process and carry a `pid` label then. Without it every process is its
own scrape target.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from connections import ConnectionsError, ToolInputError, TurnProblem, TurnTool

__all__ = ["Metrics", "metrics_routes"]

_tools_log = logging.getLogger("agent_sdk.tools")

# Tool calls: from a few milliseconds (a local stdio tool) to the 120 s default call budget.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


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
        if pool is not None:
            open_count = 0
            for name in sorted(getattr(pool, "names", list)()):
                status = pool.status(name)
                open_count += status.state == "open"
                restarts.add_metric([name, *tail], max(status.opens - 1, 0))
            sessions.add_metric(tail, open_count)
            cache = pool.listing_cache
            for name, count in sorted(cache.hits.items()):
                hits.add_metric([name, *tail], count)
            for name, count in sorted(cache.misses.items()):
                misses.add_metric([name, *tail], count)
        for name, count in sorted(getattr(self.broker, "oauth_refreshes", dict)().items()):
            refreshes.add_metric([name, *tail], count)
        return [sessions, restarts, hits, misses, refreshes, *self._identities(extra, tail)]

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


class Metrics:
    """The gateway's metrics. `call_finished` is the turn builder's `CallObserver`."""

    def __init__(self) -> None:
        multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = CollectorRegistry(auto_describe=True)
        # In multiprocess mode the counted metrics live in files shared by the host's processes and are
        # read back through MultiProcessCollector; otherwise they register here directly.
        counted = None if multiprocess else self.registry
        if multiprocess:
            MultiProcessCollector(self.registry)
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
            buckets=_BUCKETS,
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
        self._multiprocess = multiprocess
        self._watched: _BrokerCollector | None = None

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
        self.tool_calls.labels(connection, tool.name, outcome).inc()
        self.tool_seconds.labels(connection, tool.name).observe(seconds)
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

    def listing_failed(self, problems: list[TurnProblem]) -> None:
        """Count each connection a toolset was built without, by its cause (the builder's `CallObserver`)."""
        for problem in problems:
            self.listing_failures.labels(problem.connection or "", problem.code).inc()

    def turn_finished(self, status: str) -> None:
        self.turns.labels(status).inc()

    def refused(self, status: int, code: str) -> None:
        self.refusals.labels(str(status), code).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


async def _metrics(request: Request) -> Response:
    metrics: Metrics = request.state.metrics
    return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)


def metrics_routes() -> list[Route]:
    """`GET /v1/metrics` (behind the CLI-level auth chain, as every route but `/v1/health`)."""
    return [Route("/v1/metrics", _metrics, methods=["GET"])]
