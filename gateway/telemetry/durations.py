"""The MCP conventions' duration histograms, through the OpenTelemetry metrics API and on `/v1/metrics`.

`mcp.server.operation.duration` (one per peer request: its server span), `mcp.client.operation.duration`
(one per upstream request: `connections/client/_tracing.py` reports it) and `mcp.server.session.duration`
(a `serve --stdio` session, from start to the peer closing stdin), in seconds, with buckets from 10 µs
so a sub-millisecond call lands in a bucket of its own. With OpenTelemetry they carry the conventions'
attributes (`mcp.method.name`, `error.type`, `network.transport`, `mcp.protocol.version`,
`agent_sdk.connection` on the client's); on `/v1/metrics` they are `mcp_server_operation_duration_seconds`,
`mcp_client_operation_duration_seconds` and `mcp_server_session_duration_seconds`, labelled `method`,
`error_type`, `transport` (and `connection`). Recorded only with tracing on (`tracing_enabled()`):
off, no call records anything here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opentelemetry.metrics import Histogram as OtelHistogram
from opentelemetry.metrics import get_meter
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

from connections.serving import Upstream, set_client_observer

__all__ = [
    "BUCKETS",
    "McpDurations",
    "count_dropped",
    "record_server",
    "record_session",
    "spans_dropped",
    "start_durations",
]

BUCKETS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
)  # fmt: skip


class McpDurations:
    """The three histograms on one app's Prometheus registry (`gateway/metrics.py` makes one per app)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.server = Histogram(
            "mcp_server_operation_duration_seconds",
            "Peer requests (mcp.server.operation.duration) by method, error type and transport; with tracing on",
            ["method", "error_type", "transport"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.client = Histogram(
            "mcp_client_operation_duration_seconds",
            "Upstream requests (mcp.client.operation.duration) by method, error type, transport and connection",
            ["method", "error_type", "transport", "connection"],
            buckets=BUCKETS,
            registry=registry,
        )
        self.session = Histogram(
            "mcp_server_session_duration_seconds",
            "Peer sessions (mcp.server.session.duration) by transport; with tracing on",
            ["transport"],
            buckets=BUCKETS,
            registry=registry,
        )
        if registry is not None:
            registry.register(_Dropped())


class _Dropped:
    """`agent_sdk_otel_spans_dropped`: spans the OTLP endpoint did not take (read at each scrape)."""

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(
            "agent_sdk_otel_spans_dropped", "Spans the OTLP endpoint did not take (it was down)", value=_dropped[0]
        )


_dropped = [0]


def count_dropped(spans: int) -> None:
    """`spans` spans were not delivered."""
    _dropped[0] += spans


def spans_dropped() -> int:
    """Spans the OTLP endpoint did not take since start."""
    return _dropped[0]


@dataclass(slots=True)
class _Instruments:
    server: OtelHistogram
    client: OtelHistogram
    session: OtelHistogram


_prometheus: list[McpDurations] = []
_otel: list[_Instruments] = []


def start_durations(prometheus: McpDurations | None) -> None:
    """Record from now on, into OpenTelemetry's meter and `prometheus` (the app's; None: the meter only)."""
    if prometheus is not None:
        _prometheus[:] = [prometheus]
    if not _otel:
        meter = get_meter("agent-sdk")

        def histogram(name: str, text: str) -> OtelHistogram:
            return meter.create_histogram(name, unit="s", description=text, explicit_bucket_boundaries_advisory=BUCKETS)

        _otel.append(
            _Instruments(
                histogram("mcp.server.operation.duration", "MCP requests served, from request to answer"),
                histogram("mcp.client.operation.duration", "MCP requests sent to upstreams, from request to answer"),
                histogram("mcp.server.session.duration", "MCP sessions served"),
            )
        )
    set_client_observer(_record_client)


_KEPT = 1024
_children: dict[tuple[object, ...], Any] = {}
"""Each label set's Prometheus child (`labels()` takes a lock and builds a tuple each time) and each
attribute set's dict for the meter, made once: a gateway's label sets are few and repeat."""


def _kept(key: tuple[object, ...], made: Any) -> Any:
    if len(_children) >= _KEPT:
        _children.clear()
    _children[key] = made
    return made


def record_server(method: str, transport: str, version: str, seconds: float, error: str | None) -> None:
    """One peer request served (a server span's duration)."""
    for found in _prometheus:
        key = (found.server, method, error, transport)
        child = _children.get(key) or _kept(key, found.server.labels(method, error or "", transport))
        child.observe(seconds)
    for instruments in _otel:
        key = ("server", method, transport, version, error)
        attributes = _children.get(key)
        if attributes is None:
            attributes = {"mcp.method.name": method, "network.transport": transport, "mcp.protocol.version": version}
            if error is not None:
                attributes["error.type"] = error
            _kept(key, attributes)
        instruments.server.record(seconds, attributes)


def _record_client(upstream: Upstream, method: str, seconds: float, error: str | None) -> None:
    for found in _prometheus:
        key = (found.client, method, error, upstream)
        child = _children.get(key) or _kept(
            key, found.client.labels(method, error or "", upstream.transport, upstream.connection)
        )
        child.observe(seconds)
    for instruments in _otel:
        key = ("client", method, upstream, error)
        attributes = _children.get(key)
        if attributes is None:
            attributes = {
                "mcp.method.name": method, "network.transport": upstream.transport,
                "mcp.protocol.version": upstream.version, "agent_sdk.connection": upstream.connection,
            }  # fmt: skip
            if error is not None:
                attributes["error.type"] = error
            _kept(key, attributes)
        instruments.client.record(seconds, attributes)


def record_session(transport: str, seconds: float) -> None:
    """One peer session ended."""
    for found in _prometheus:
        found.session.labels(transport).observe(seconds)
    for instruments in _otel:
        instruments.session.record(seconds, {"network.transport": transport})
