"""The gateway's hand-written OTLP span encoding (`gateway/telemetry/otlp.py`) against the SDK's encoder:
spans made by the real OpenTelemetry SDK, both encodings decoded with `opentelemetry-proto`'s definitions,
the two messages equal; and its exporter's POST, as an OTLP/HTTP receiver decodes it."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as sdk_encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from gateway.telemetry import otlp
from gateway.telemetry.otlp import EncodedSpan, EncodingSpanProcessor, FastOtlpSpanExporter, encode_spans

PEER = SpanContext(
    0x4BF92F3577B34DA6A3CE929D0E0E4736,
    0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=TraceFlags(1),
    trace_state=TraceState([("vendor", "v1"), ("other", "x")]),
)


def _spans() -> list[ReadableSpan]:
    """A gateway's call (a server span under a peer's remote parent, a client span under it) and the
    rarer shapes: every attribute type, events, links, statuses, kinds, two resources, scopes with a
    version, schema URL and attributes."""
    memory = InMemorySpanExporter()
    gateway = TracerProvider(resource=Resource.create({"service.name": "agent-sdk", "deployment": "test", "n": 3}))
    gateway.add_span_processor(SimpleSpanProcessor(memory))
    other = TracerProvider(
        resource=Resource({"service.name": "other", "ratio": 0.5, "tags": ("a", "b")}, "https://s/1")
    )
    other.add_span_processor(SimpleSpanProcessor(memory))
    ours = gateway.get_tracer("agent-sdk")
    sdk = gateway.get_tracer("mcp-python-sdk", "2.0.0", schema_url="https://opentelemetry.io/schemas/1.30.0")
    scoped = gateway.get_tracer("scoped", attributes={"scope.attr": "yes", "scope.n": 1})
    server_attributes = {
        "mcp.method.name": "tools/call", "mcp.protocol.version": "2025-11-25", "jsonrpc.request.id": "7",
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "agent_sdk.connection": "fast",
        "network.transport": "tcp", "agent_sdk.principal": "p", "mcp.session.id": "s-1",
    }  # fmt: skip
    server = ours.start_span(
        "tools/call echo", set_span_in_context(NonRecordingSpan(PEER)), SpanKind.SERVER, server_attributes
    )
    client = sdk.start_span("tools/call echo", set_span_in_context(server), SpanKind.CLIENT, {"mcp.method.name": "x"})
    client.set_attributes({"error.type": "-32602", "rpc.response.status_code": "-32602"})
    client.set_status(Status(StatusCode.ERROR, "Invalid request parameters"))
    client.end()
    server.set_attribute("error.type", "tool_error")
    server.set_status(StatusCode.ERROR)
    server.end()
    values = {
        "str": "é ünïcode", "empty": "", "yes": True, "no": False, "zero": 0, "int": 1234567890123,
        "negative": -5, "float": 2.5, "zero.float": 0.0, "strs": ["a", "b"], "ints": (1, -2, 3),
        "bools": [True, False], "floats": [0.5], "long": "x" * 300,
    }  # fmt: skip
    with scoped.start_as_current_span("typed", kind=SpanKind.INTERNAL, attributes=values) as typed:
        typed.add_event("an event", {"at": 1, "what": "it"})
        typed.add_event("bare")
        typed.set_status(StatusCode.OK)
    linked = other.get_tracer("other").start_span(
        "linked", Context(), SpanKind.PRODUCER, links=[Link(PEER, {"link.attr": "l"}), Link(server.get_span_context())]
    )
    linked.end()
    other.get_tracer("other").start_span("consumer", kind=SpanKind.CONSUMER).end()
    ours.start_span("root", kind=SpanKind.SERVER).end()
    return list(memory.get_finished_spans())


def test_the_hand_written_encoding_decodes_to_the_sdk_encoders_message() -> None:
    spans = _spans()
    ours = ExportTraceServiceRequest.FromString(encode_spans(spans))
    theirs = sdk_encode_spans(spans)
    assert len(ours.resource_spans) == 2
    for mine, sdk in zip(ours.resource_spans, theirs.resource_spans, strict=True):  # one message at a time first:
        assert mine.resource == sdk.resource  # a difference shows where it is
        for mine_scope, sdk_scope in zip(mine.scope_spans, sdk.scope_spans, strict=True):
            assert mine_scope.scope == sdk_scope.scope
            for mine_span, sdk_span in zip(mine_scope.spans, sdk_scope.spans, strict=True):
                assert mine_span == sdk_span, mine_span.name
    assert ours == theirs
    assert ExportTraceServiceRequest.FromString(encode_spans(spans[:1])) == sdk_encode_spans(spans[:1])  # cached parts
    assert encode_spans([]) == sdk_encode_spans([]).SerializeToString()
    assert ExportTraceServiceRequest.FromString(encode_spans([EncodedSpan(s) for s in spans])) == theirs  # queued bytes
    mixed = [EncodedSpan(s) if i % 2 else s for i, s in enumerate(spans)]
    assert ExportTraceServiceRequest.FromString(encode_spans(mixed)) == theirs


def test_an_attribute_value_that_cannot_be_encoded_is_left_out_as_the_sdk_does() -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    span = provider.get_tracer("t").start_span("s", attributes={"kept": "k"})
    span._attributes._dict["odd"] = object()  # pyright: ignore[reportAttributeAccessIssue]  # the SDK cleans values; force one past it
    span.end()
    spans = list(memory.get_finished_spans())
    ours = ExportTraceServiceRequest.FromString(encode_spans(spans))
    assert ours == sdk_encode_spans(spans)
    assert [a.key for a in ours.resource_spans[0].scope_spans[0].spans[0].attributes] == ["kept"]


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    got: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(
                ({k.lower(): v for k, v in self.headers.items()}, self.rfile.read(int(self.headers["Content-Length"])))
            )
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/traces", got
    server.shutdown()
    thread.join()


def test_the_exporter_posts_the_same_request_with_the_sdks_otel_settings(
    receiver: tuple[str, list[tuple[dict[str, str], bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, got = receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-tenant=acme")
    exporter = FastOtlpSpanExporter(endpoint=url)
    spans = _spans()
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    [(headers, body)] = got
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["content-encoding"] == "gzip"
    assert headers["x-tenant"] == "acme"
    assert ExportTraceServiceRequest.FromString(gzip.decompress(body)) == sdk_encode_spans(spans)


def test_a_receiver_that_is_down_fails_the_export_without_raising() -> None:
    exporter = FastOtlpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces", timeout=1)
    assert exporter.export(_spans()[:1]) is SpanExportResult.FAILURE
    exporter.shutdown()


def test_the_encoding_processor_exports_what_the_sdk_would_for_the_spans_it_was_handed(
    receiver: tuple[str, list[tuple[dict[str, str], bytes]]],
) -> None:
    url, got = receiver
    exporter = FastOtlpSpanExporter(endpoint=url)
    assert exporter.posts_bytes
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-sdk"}))
    memory = InMemorySpanExporter()
    provider.add_span_processor(EncodingSpanProcessor(exporter))
    provider.add_span_processor(SimpleSpanProcessor(memory))  # the same spans, as the SDK's encoder sees them
    tracer = provider.get_tracer("agent-sdk")
    with tracer.start_as_current_span("tools/call echo", kind=SpanKind.SERVER, attributes={"mcp.method.name": "x"}):
        tracer.start_span("tools/call echo", kind=SpanKind.CLIENT, attributes={"agent_sdk.connection": "c"}).end()
    not_sampled = set_span_in_context(NonRecordingSpan(SpanContext(PEER.trace_id, PEER.span_id, True, TraceFlags(0))))
    tracer.start_span("dropped", not_sampled).end()  # the default sampler follows the unsampled parent: not exported
    assert provider.force_flush()
    provider.shutdown()
    [(_, body)] = got
    assert ExportTraceServiceRequest.FromString(body) == sdk_encode_spans(memory.get_finished_spans())
    assert [s.name for s in memory.get_finished_spans()] == ["tools/call echo", "tools/call echo"]


def test_a_span_that_cannot_be_encoded_as_it_ends_does_not_fail_the_call(
    receiver: tuple[str, list[tuple[dict[str, str], bytes]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, got = receiver
    exported: list[SpanExportResult] = []

    class Watched(FastOtlpSpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            exported.append(super().export(spans))
            return exported[-1]

    def broken(span: ReadableSpan) -> bytes:
        raise RuntimeError("an encoder bug")

    provider = TracerProvider()
    provider.add_span_processor(EncodingSpanProcessor(Watched(endpoint=url)))
    monkeypatch.setattr(otlp, "_span", broken)
    provider.get_tracer("t").start_span("s").end()  # no exception reaches the caller
    assert provider.force_flush()
    provider.shutdown()
    assert exported == [SpanExportResult.FAILURE]  # the batch is reported failed (setup.py counts it dropped)
    assert got == []
