"""The span exporter `start_telemetry` installs over OTLP/HTTP: the SDK's `OTLPSpanExporter` (its endpoint,
headers, compression, timeout, TLS and retries, all from the same `OTEL_*` variables), with the batch's
`ExportTraceServiceRequest` written by `encode_spans` here instead of the SDK's encoder.

Why by hand: the SDK's encoder builds a protobuf message object per span, attribute and value and then
serialises the tree, about 50 µs of the export thread's CPU per span on the reference box, more than
the rest of tracing a call together. This writes the same message's wire format directly (varints, length
prefixes, the fixed64 times), with the resource and scope parts and each attribute's key encoded once
and kept: a few microseconds a span. The bytes decode, with `opentelemetry-proto`'s definitions, to the
message the SDK's encoder makes for the same spans (`tests/gateway/telemetry/test_otlp_encoding.py`);
the rare parts (events, links, array or map values) are built with those definitions' own classes.

`EncodingSpanProcessor` is the SDK's `BatchSpanProcessor` (its queue, thread, `OTEL_BSP_*` settings,
flush and shutdown) with one change: a span is encoded when it ends, on the thread that ended it, and the
queue holds its bytes (`EncodedSpan`), not the span. The CPU is the same, but the span's twenty-odd
objects die young instead of waiting in the queue for the export and being promoted by the garbage
collector, whose collections then cost every call (about 40 µs a call in `bench/bench_tracing.py
--micro`, measured both ways).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.trace import SpanContext

__all__ = ["EncodedSpan", "EncodingSpanProcessor", "FastOtlpSpanExporter", "encode_spans"]

logger = logging.getLogger("agent_sdk.telemetry")

_REMOTE_FLAGS = 0x100 | 0x200  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_LOCAL_FLAGS = 0x100


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 as protobuf writes it: two's complement, ten bytes
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (`tag` is field number << 3 | 2, under 128)."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _value(value: Any) -> bytes:
    """An `AnyValue`'s bytes, as the SDK's encoder types it (bool before int; sequences, mappings)."""
    if isinstance(value, str):
        return _field(0x0A, value.encode())
    if isinstance(value, bool):  # `AnyValue.value` is a oneof: a zero is written too
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if value is None:
        return b""
    return _message_value(value).SerializeToString()


def _message_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, Sequence):
        items: Sequence[Any] = value
        return AnyValue(array_value=ArrayValue(values=[_message_value(v) for v in items]))
    if isinstance(value, Mapping):
        pairs: Mapping[Any, Any] = value
        return AnyValue(
            kvlist_value=KeyValueList(values=[KeyValue(key=str(k), value=_message_value(v)) for k, v in pairs.items()])
        )
    raise TypeError(f"invalid type {type(value).__name__} of attribute value {value!r}")


_LENGTHS = [bytes((n,)) for n in range(128)]


def _length(n: int) -> bytes:
    return _LENGTHS[n] if n < 0x80 else _varint(n)


_pairs: dict[tuple[str, str], bytes] = {}
"""Each (key, string value) pair's `KeyValue` bytes, encoded once: most of a span's attributes repeat from
call to call (the method, tool, connection, principal, session); cleared when it holds `_PAIRS_KEPT`."""
_PAIRS_KEPT = 4096


def _attributes(tag: int, attributes: Mapping[str, Any] | None) -> bytes:
    """`attributes` as repeated `KeyValue` fields numbered `tag`; a value that cannot be encoded is left
    out with a log line, as the SDK's encoder does."""
    if not attributes:
        return b""
    head = _LENGTHS[tag]
    out: list[bytes] = []
    for key, value in attributes.items():
        if type(value) is str:
            pair = _pairs.get((key, value))
            if pair is None:
                encoded = value.encode()
                any_value = b"\x0a" + _length(len(encoded)) + encoded
                name = key.encode()
                pair = b"\x0a" + _length(len(name)) + name + b"\x12" + _length(len(any_value)) + any_value
                if len(_pairs) >= _PAIRS_KEPT:
                    _pairs.clear()
                _pairs[(key, value)] = pair
        else:
            try:
                any_value = _value(value)
            except Exception as exc:  # boundary: one bad value must not lose the batch (the SDK's behaviour)
                logger.warning("span attribute %s not exported: %s", key, exc)
                continue
            name = key.encode()
            pair = b"\x0a" + _length(len(name)) + name + b"\x12" + _length(len(any_value)) + any_value
        out += (head, _length(len(pair)), pair)
    return b"".join(out)


def _scope(scope: Any) -> bytes:
    if scope is None:
        return b""
    out = b""
    if scope.name:
        out += _field(0x0A, scope.name.encode())
    if scope.version:
        out += _field(0x12, scope.version.encode())
    return out + _attributes(0x1A, scope.attributes)


_WHOLES_KEPT = 256
_wholes: dict[int, tuple[object, bytes]] = {}
"""Each resource's `Resource` bytes and each scope's `InstrumentationScope` bytes, by object (kept with it)."""


def _once(thing: object, encode: Any) -> bytes:
    kept = _wholes.get(id(thing))
    if kept is not None and kept[0] is thing:
        return kept[1]
    encoded: bytes = encode(thing)
    if len(_wholes) < _WHOLES_KEPT:
        _wholes[id(thing)] = (thing, encoded)
    return encoded


def _resource(resource: Any) -> bytes:
    return _attributes(0x0A, resource.attributes)


def _fixed64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _span(span: ReadableSpan) -> bytes:
    context: SpanContext = span.context  # pyright: ignore[reportAssignmentType]
    parent = span.parent
    out = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    if context.trace_state:
        out.append(_field(0x1A, ",".join(f"{k}={v}" for k, v in context.trace_state.items()).encode()))
    if parent is not None:
        out += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    if span.name:
        out.append(_field(0x2A, span.name.encode()))
    out.append(bytes((0x30, span.kind.value + 1)))  # the SDK's kinds, INTERNAL (0) on, are OTLP's 1 on
    if span.start_time:
        out += (b"\x39", _fixed64(span.start_time))
    if span.end_time:
        out += (b"\x41", _fixed64(span.end_time))
    out.append(_attributes(0x4A, span.attributes))
    if span.dropped_attributes:
        out += (b"\x50", _varint(span.dropped_attributes))
    if span.events:
        out.append(_events(span))
    if span.dropped_events:
        out += (b"\x60", _varint(span.dropped_events))
    if span.links:
        out.append(_links(span))
    if span.dropped_links:
        out += (b"\x70", _varint(span.dropped_links))
    status = span.status
    described = _field(0x12, status.description.encode()) if status.description else b""
    code = status.status_code.value
    status_bytes = described + (bytes((0x18, code)) if code else b"")
    out += (b"\x7a", _varint(len(status_bytes)), status_bytes)
    flags = _REMOTE_FLAGS if parent is not None and parent.is_remote else _LOCAL_FLAGS
    out += (b"\x85\x01", flags.to_bytes(4, "little"))
    return b"".join(out)


def _events(span: ReadableSpan) -> bytes:
    return b"".join(
        _field(
            0x5A,
            PbSpan.Event(
                name=event.name,
                time_unix_nano=event.timestamp,
                attributes=_pb_attributes(event.attributes),
                dropped_attributes_count=event.dropped_attributes,
            ).SerializeToString(),
        )
        for event in span.events
    )


def _links(span: ReadableSpan) -> bytes:
    return b"".join(
        _field(
            0x6A,
            PbSpan.Link(
                trace_id=link.context.trace_id.to_bytes(16, "big"),
                span_id=link.context.span_id.to_bytes(8, "big"),
                attributes=_pb_attributes(link.attributes),
                dropped_attributes_count=link.dropped_attributes,
                flags=_REMOTE_FLAGS if link.context.is_remote else _LOCAL_FLAGS,
            ).SerializeToString(),
        )
        for link in span.links
    )


def _pb_attributes(attributes: Mapping[str, Any] | None) -> list[KeyValue]:
    return [KeyValue(key=k, value=_message_value(v)) for k, v in (attributes or {}).items()]


class EncodedSpan:
    """An ended span as the batch queue holds it: its `Span` message's bytes, and what the request groups
    it by (its resource and instrumentation scope; `context` for the processor's sampled check)."""

    __slots__ = ("context", "data", "instrumentation_scope", "resource")

    def __init__(self, span: ReadableSpan) -> None:
        self.data = _span(span)
        self.context = span.context
        self.resource = span.resource
        self.instrumentation_scope = span.instrumentation_scope


class EncodingSpanProcessor(BatchSpanProcessor):
    """The SDK's batch span processor queueing each ended span's bytes (module docstring); for
    `FastOtlpSpanExporter` only (another exporter would be handed `EncodedSpan`s)."""

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return
        try:
            encoded: Any = EncodedSpan(span)
        except Exception as exc:  # boundary: ending a span must never fail the call; the export encodes it
            logger.warning("a span could not be encoded when it ended: %s", exc)
            encoded = span
        super().on_end(encoded)


def encode_spans(spans: Sequence[ReadableSpan | EncodedSpan]) -> bytes:
    """The serialised `ExportTraceServiceRequest` of `spans`: by resource, then instrumentation scope, in the
    order they first appear (the SDK encoder's grouping, by equality; each object is hashed once a batch)."""
    grouped: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    canonical: dict[int, int] = {}  # id of a span's resource or scope -> id of the first equal one
    first: dict[Any, int] = {}
    last: tuple[object, object] | None = None
    bucket: list[bytes] = []
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        if last is None or resource is not last[0] or scope is not last[1]:  # a batch's spans mostly share both
            last = (resource, scope)
            rid = canonical.get(id(resource))
            if rid is None:
                rid = canonical[id(resource)] = first.setdefault(("r", resource), id(resource))
            sid = canonical.get(id(scope))
            if sid is None:
                sid = canonical[id(scope)] = first.setdefault(("s", scope), id(scope))
            bucket = grouped.setdefault(rid, (resource, {}))[1].setdefault(sid, (scope, []))[1]
        bucket.append(span.data if isinstance(span, EncodedSpan) else _span(span))
    request: list[bytes] = []
    for resource, scopes in grouped.values():
        parts = [_field(0x0A, _once(resource, _resource))]
        for scope, encoded in scopes.values():
            body = [_field(0x0A, _once(scope, _scope) if scope is not None else b"")]
            body += (b"\x12" + _length(len(one)) + one for one in encoded)
            if scope is not None and scope.schema_url:
                body.append(_field(0x1A, scope.schema_url.encode()))
            parts.append(_field(0x12, b"".join(body)))
        if resource.schema_url:
            parts.append(_field(0x1A, resource.schema_url.encode()))
        request.append(_field(0x0A, b"".join(parts)))
    return b"".join(request)


class FastOtlpSpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP span exporter posting `encode_spans`' bytes (module docstring); on an SDK whose
    exporter does not have the HTTP client this relies on (`posts_bytes` is False), the SDK's export."""

    @property
    def posts_bytes(self) -> bool:
        """Whether this SDK's exporter has the HTTP client `export` posts `encode_spans`' bytes with."""
        return hasattr(getattr(self, "_client", None), "export")

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        client: Any = getattr(self, "_client", None)
        if not self.posts_bytes or getattr(self, "_shutdown", False):
            return super().export(spans)
        try:
            data = encode_spans(spans)
        except Exception as exc:  # boundary: the export thread must go on
            logger.warning("a batch of %d span(s) could not be encoded: %s", len(spans), exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS if client.export(data).success else SpanExportResult.FAILURE
