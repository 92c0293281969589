"""`start_telemetry`: tracing and metrics on or off, decided once when the gateway starts.

On when `serve --otlp-endpoint URL` is given, when an `OTEL_EXPORTER_OTLP_*ENDPOINT` variable or
`OTEL_TRACES_EXPORTER=otlp` is set, or when a tracer provider is already installed (the operator ran
`opentelemetry-instrument agent-sdk serve`: its provider and exporters are used as they are); off when
`OTEL_SDK_DISABLED=true` or none of these holds. On, with no provider yet, it installs the SDK's:
a `BatchSpanProcessor` over the OTLP exporter (HTTP/protobuf; gRPC when `OTEL_EXPORTER_OTLP_PROTOCOL`
(or `..._TRACES_PROTOCOL`) is `grpc` and `opentelemetry-exporter-otlp-proto-grpc` is installed), a
periodic OTLP metric reader (unless `OTEL_METRICS_EXPORTER=none`), an OTLP log exporter for the audit
trail's records (unless `OTEL_LOGS_EXPORTER=none`; over HTTP only), and a resource from
`OTEL_SERVICE_NAME` (default `agent-sdk`) and `OTEL_RESOURCE_ATTRIBUTES`. The other `OTEL_*` variables
(headers, timeouts, batch sizes, sampler) are the SDK's own. Needs `pip install 'agent-sdk[otel]'`.

An endpoint that is down costs the calls nothing (export runs on the batch processor's thread): spans
it did not take are counted (`agent_sdk_otel_spans_dropped` on `/v1/metrics`) and one log line says so,
one more when it takes spans again; the exporter's own per-batch error lines are silenced.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import metrics, trace

from connections.serving import UPSTREAM, client_span_attributes, set_tracing, shown_url

from .durations import McpDurations, count_dropped, start_durations

__all__ = ["TelemetryUnavailable", "app_durations", "start_telemetry"]

logger = logging.getLogger("agent_sdk.telemetry")
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.sdk.metrics._internal.export",
)
_lock = threading.Lock()


class TelemetryUnavailable(Exception):
    """Tracing was asked for but cannot be set up (the sentence says how to fix it)."""


def _wanted(endpoint: str | None, environ: Mapping[str, str]) -> bool:
    if endpoint:
        return True
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "otlp":
        return True
    return any(environ.get(k) for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def start_telemetry(endpoint: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Decide whether tracing is on (module docstring); set it up if it is. Raises `TelemetryUnavailable`."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        set_tracing(False)
        return False
    provider: Any = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        if not _wanted(endpoint, environ):
            set_tracing(False)
            return False
        provider = _install(endpoint, environ)
    if hasattr(provider, "add_span_processor"):
        provider.add_span_processor(_upstream_spans())
    set_tracing(True)
    start_durations(None)
    return True


def app_durations(registry: Any) -> McpDurations:
    """The app's `/v1/metrics` histograms (and the dropped-spans count), recorded into from now on."""
    durations = McpDurations(registry)
    start_durations(durations)
    return durations


def _install(endpoint: str | None, environ: Mapping[str, str]) -> Any:
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise TelemetryUnavailable("tracing needs the OpenTelemetry SDK: pip install 'agent-sdk[otel]'") from None
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    grpc = protocol.strip().lower() == "grpc"
    base = endpoint.rstrip("/") if endpoint else None
    try:
        if grpc:
            # An optional package (not in the `otel` extra): looked up by name.
            span_type = importlib.import_module(
                "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
            ).OTLPSpanExporter
            metric_type = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.metric_exporter")
            spans: Any = span_type(endpoint=base) if base else span_type()
            readings: Any = metric_type.OTLPMetricExporter(endpoint=base) if base else metric_type.OTLPMetricExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter as HttpMetricExporter,
            )

            from .otlp import FastOtlpSpanExporter  # the SDK's, encoding faster (otlp.py)

            spans = FastOtlpSpanExporter(endpoint=f"{base}/v1/traces") if base else FastOtlpSpanExporter()
            readings = HttpMetricExporter(endpoint=f"{base}/v1/metrics") if base else HttpMetricExporter()
    except ImportError:
        kind = "opentelemetry-exporter-otlp-proto-grpc" if grpc else "'agent-sdk[otel]'"
        raise TelemetryUnavailable(f"OTLP export{' over gRPC' if grpc else ''} needs pip install {kind}") from None
    for name in _EXPORTER_LOGGERS:  # a down endpoint is one line of ours, not one of theirs per batch
        logging.getLogger(name).setLevel(logging.CRITICAL)
    resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: "agent-sdk"})
    provider = TracerProvider(resource=resource)
    where = shown_url(base) if base else "the OTLP endpoint"  # never user info or a query value
    if getattr(spans, "posts_bytes", False):  # ours over HTTP: spans encoded as they end (otlp.py)
        from .otlp import EncodingSpanProcessor

        provider.add_span_processor(EncodingSpanProcessor(_counting(spans, where)))
    else:
        provider.add_span_processor(BatchSpanProcessor(_counting(spans, where)))
    trace.set_tracer_provider(provider)
    readers: list[MetricReader] = []
    if environ.get("OTEL_METRICS_EXPORTER", "").strip().lower() != "none":
        readers.append(PeriodicExportingMetricReader(readings))
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))
    if not grpc and environ.get("OTEL_LOGS_EXPORTER", "").strip().lower() != "none":
        _install_logs(resource, base)  # the audit trail's OpenTelemetry records (gateway/audit/_sinks.py) go along
    return provider


def _install_logs(resource: Any, base: str | None) -> None:
    from opentelemetry._logs import set_logger_provider
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{base}/v1/logs") if base else OTLPLogExporter())
    )
    set_logger_provider(logs)


def _counting(exporter: Any, where: str) -> Any:
    """`exporter`, counting the spans it could not deliver and saying so once per outage."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Counting(SpanExporter):
        down = False

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            try:
                result = exporter.export(spans)
            except Exception:  # boundary: an exporter bug must not stop the batch thread
                result = SpanExportResult.FAILURE
            with _lock:
                if result is SpanExportResult.SUCCESS:
                    if self.down:
                        self.down = False
                        logger.warning("%s takes spans again", where, extra={"event": "otlp_up"})
                    return result
                count_dropped(len(spans))
                if not self.down:
                    self.down = True
                    logger.warning(
                        "%s did not take %d span(s): dropping spans while it is down (calls are unaffected; "
                        "counted in agent_sdk_otel_spans_dropped)",
                        where,
                        len(spans),
                        extra={"event": "otlp_down"},
                    )
            return result

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return exporter.force_flush(timeout_millis)

    return Counting()


def _upstream_spans() -> Any:
    """The span processor naming each upstream request's client span the SDK's dispatcher opens for its
    connection (`connections/client/_tracing.py`): `{method} {target}` and `client_span_attributes`."""
    from opentelemetry.sdk.trace import SpanProcessor

    prefix = "MCP send "

    class UpstreamSpans(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            upstream = UPSTREAM.get()
            if upstream is None or span.kind is not trace.SpanKind.CLIENT or not span.name.startswith(prefix):
                return  # not an upstream request's, or the fast wire's (opened with its labels)
            name = span.name[len(prefix) :]
            span.update_name(name)
            method, _, target = name.partition(" ")
            span.set_attributes(client_span_attributes(upstream, method, target))

    return UpstreamSpans()
