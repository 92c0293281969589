"""With an OpenTelemetry SDK installed, every audit record is also an OpenTelemetry log record (docs/audit.md,
"Sinks"). Run in a child process: a tracer provider, once installed,
stays for the whole process (it would turn tracing on for every later test)."""

from __future__ import annotations

import json
import subprocess
import sys

from ..conftest import ROOT

_CHILD = r"""
import json, anyio
from opentelemetry import trace, _logs
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from gateway.audit import AuditRecord, OtelSink

async def main():
    exporter = InMemoryLogRecordExporter()
    trace.set_tracer_provider(TracerProvider())
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    _logs.set_logger_provider(provider)
    sink = OtelSink()
    record = AuditRecord("bearer:a", "mcp/tools", "echo", connection="everything", outcome="tool_error")
    await sink.write([record], [record.line()])
    out = []
    for item in exporter.get_finished_logs():
        log = item.log_record
        out.append({"body": log.body, "event": log.event_name, "attributes": dict(log.attributes or {})})
    print(json.dumps(out))

anyio.run(main)
"""


def test_audit_records_become_opentelemetry_log_records_when_an_sdk_is_installed() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr
    logs = json.loads(done.stdout)
    assert len(logs) == 1
    assert logs[0]["event"] == "agent_sdk.audit"
    assert json.loads(logs[0]["body"])["target"] == "echo"
    assert logs[0]["attributes"]["agent_sdk.audit.outcome"] == "tool_error"
    assert logs[0]["attributes"]["agent_sdk.audit.connection"] == "everything"
