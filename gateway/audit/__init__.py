"""The audit trail: one record per call and per refusal, to a file, a Redis stream and OpenTelemetry logs;
and `CallGuard`, which every surface wraps around the tool it runs (docs/audit.md)."""

from ._guard import AuditUnavailable as AuditUnavailable
from ._guard import CallGuard as CallGuard
from ._guard import refusal_rpc_error as refusal_rpc_error
from ._reading import AuditQuery as AuditQuery
from ._reading import read_file_records as read_file_records
from ._reading import read_stream_records as read_stream_records
from ._record import OUTCOMES as OUTCOMES
from ._record import AuditRecord as AuditRecord
from ._record import Outcome as Outcome
from ._record import argument_digest as argument_digest
from ._serving import guard_counters as guard_counters
from ._serving import serving_guard as serving_guard
from ._sinks import AUDIT_STREAM as AUDIT_STREAM
from ._sinks import FileSink as FileSink
from ._sinks import OtelSink as OtelSink
from ._sinks import RedisSink as RedisSink
from ._sinks import Sink as Sink
from ._sinks import audit_folder as audit_folder
from ._trail import AuditTrail as AuditTrail

__all__ = [
    "AUDIT_STREAM",
    "OUTCOMES",
    "AuditQuery",
    "AuditRecord",
    "AuditTrail",
    "AuditUnavailable",
    "CallGuard",
    "FileSink",
    "OtelSink",
    "Outcome",
    "RedisSink",
    "Sink",
    "argument_digest",
    "audit_folder",
    "guard_counters",
    "read_file_records",
    "read_stream_records",
    "refusal_rpc_error",
    "serving_guard",
]
