"""The Prometheus collectors `gateway/metrics.py` registers: the broker's connections, identities and pins read at
each scrape (`BrokerCollector`), and the process's build information (`StaticCollector`)."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["CONNECTION_STATES", "BrokerCollector", "StaticCollector", "package_version"]

CONNECTION_STATES = ("idle", "queued", "opening", "open", "failing", "paused", "needs_login")


def package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


class BrokerCollector(Collector):
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


class StaticCollector(Collector):
    """`agent_sdk_build_info` and the OAuth token expiry (`Metrics.read_tokens` fills it before a scrape)."""

    def __init__(self) -> None:
        self.expires_at: dict[str, float | None] = {}
        self.grants: dict[str, int] = {}
        self.build = {
            "version": package_version("agent-sdk"),
            "mcp": package_version("mcp"),
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
