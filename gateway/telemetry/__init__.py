"""OpenTelemetry for the gateway: set-up (`setup.py`), server spans (`spans.py`) and the MCP duration
histograms (`durations.py`); upstream requests are marked in `connections/client/_tracing.py`.
docs/operations.md ("Tracing") documents the spans, metrics and settings."""

from .durations import BUCKETS, McpDurations, record_session, spans_dropped
from .setup import TelemetryUnavailable, app_durations, start_telemetry
from .spans import Inbound, ServerSpans, inbound_of_scope, install_server_spans, server_span, trim_baggage

__all__ = [
    "BUCKETS",
    "Inbound",
    "McpDurations",
    "ServerSpans",
    "TelemetryUnavailable",
    "app_durations",
    "inbound_of_scope",
    "install_server_spans",
    "record_session",
    "server_span",
    "spans_dropped",
    "start_telemetry",
    "trim_baggage",
]
