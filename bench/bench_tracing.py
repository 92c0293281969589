"""What tracing costs the gateway per `tools/call`: `serve` without tracing vs `serve --otlp-endpoint`.

Two gateways on the same fast upstream (`bench/fast_upstream.py`, one connection each), one with tracing
off (no `--otlp-endpoint`, no `OTEL_*`) and one exporting over OTLP/HTTP with the SDK's batch span
processor to a receiver in this process that answers 200 to every export (its CPU is not the
gateway's). Raw JSON-RPC peers (8 keep-alive clients, at 2025-11-25 and at 2026-07-28) call `echo` in
phases that alternate between the two gateways; the gateway process's CPU time is read from `/proc`
around every phase. The figure is the difference of CPU per call, on minus off: the server span, the
upstream client span, two histogram records, propagation into `_meta` and the headers, and the batch
exporter's thread encoding and posting the spans.

    .venv/bin/python bench/bench_tracing.py                 # about a minute
    .venv/bin/python bench/bench_tracing.py --calls 800 --rounds 6
    .venv/bin/python bench/bench_tracing.py --sample 0.01   # OTEL_TRACES_SAMPLER=parentbased_traceidratio
    .venv/bin/python bench/bench_tracing.py --micro         # in one process: the tracing work alone
    .venv/bin/python bench/bench_tracing.py --micro --parts # ... and where its time goes
    .venv/bin/python bench/bench_tracing.py --sdk-floor     # the OpenTelemetry SDK's own spans and records alone

`--micro` times, in this process, exactly what tracing adds to one call (the server span with a
peer's `traceparent`, the traced dispatcher, the client span the fast wire opens with the span
processor's labels, propagation into `_meta` and the headers, the four histogram records) with the
SDK's batch processor and OTLP/HTTP exporter posting to the sink, after a flush: process CPU (all
threads) per call, without the noise of the other processes on a busy box.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import (
    FAST_UPSTREAM,
    HANDSHAKE,
    MODERN,
    RawPeer,
    cpu_seconds,
    free_port,
    phase,
    start_listening,
    start_serve,
)

CONNECTION = (
    "from connections import define_connection\n\nconnection = define_connection(url={url!r}, advertise_tools=True)\n"
)


def receiver() -> tuple[str, list[int]]:
    """An OTLP/HTTP sink on a thread: answers 200, counts the bytes it got."""
    got = [0, 0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            got[0] += len(self.rfile.read(int(self.headers["Content-Length"])))
            got[1] += 1
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{port}", got


async def run(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    up_port = free_port()
    upstream = start_listening([sys.executable, str(FAST_UPSTREAM), str(up_port)], up_port, "fast upstream", {})
    sink, got = receiver()
    gateways: dict[str, tuple[Any, int]] = {}
    try:
        for name, flags in (("off", ()), ("on", ("--otlp-endpoint", sink))):
            if name == "on" and args.sample is not None:  # the SDK reads its sampler from these
                os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
                os.environ["OTEL_TRACES_SAMPLER_ARG"] = str(args.sample)
            project = tmp / name / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            url = f"http://127.0.0.1:{up_port}/mcp"
            (project / "agent" / "mcp-connections" / "fast.py").write_text(CONNECTION.format(url=url))
            gateways[name] = start_serve(project, tmp / name / "state", *flags)
        for version in (HANDSHAKE, MODERN):
            cpu: dict[str, list[float]] = {name: [] for name in gateways}
            async with httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=64), timeout=30) as http:
                peers: dict[str, list[RawPeer]] = {}
                for name, (_, port) in gateways.items():
                    peers[name] = [RawPeer(f"http://127.0.0.1:{port}/v1/mcp/tools", http, version) for _ in range(8)]
                    for peer in peers[name]:
                        await peer.open()
                    await phase(peers[name], args.calls, [])  # warm-up
                for _ in range(args.rounds):
                    for name, (proc, _) in gateways.items():
                        before = cpu_seconds(proc.pid)
                        await phase(peers[name], args.calls, [])
                        cpu[name].append((cpu_seconds(proc.pid) - before) / args.calls * 1e6)
            off, on = statistics.median(cpu["off"]), statistics.median(cpu["on"])
            print(
                f"{version}: gateway CPU per call, median of {args.rounds} phases of {args.calls}: "
                f"off {off:.0f} us, on {on:.0f} us, tracing costs {on - off:+.0f} us "
                f"(phases off {[round(x) for x in cpu['off']]}, on {[round(x) for x in cpu['on']]})"
            )
        print(f"the receiver got {got[1]} exports, {got[0] / 1e6:.1f} MB")
    finally:
        for proc, _ in gateways.values():
            proc.terminate()
        upstream.terminate()


async def micro(args: argparse.Namespace) -> None:
    from opentelemetry import trace
    from opentelemetry.propagate import inject
    from prometheus_client import CollectorRegistry

    from connections.client._fast_calls import client_span
    from connections.client._tracing import TracedDispatcher
    from connections.serving import Upstream
    from gateway.telemetry import Inbound, app_durations, server_span, start_telemetry

    sink, got = receiver()
    if args.sample is not None:
        os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
        os.environ["OTEL_TRACES_SAMPLER_ARG"] = str(args.sample)
    start_telemetry(sink)
    app_durations(CollectorRegistry())

    class Wire:  # the fast wire's tracing work (`FastCalls._call`), without its socket
        async def answer(self, method: str, params: Any, opts: Any) -> dict[str, Any]:
            with client_span(method, params["name"], "agent-sdk-1"):
                meta: dict[str, Any] = {}
                carrier: dict[str, str] = {}
                inject(carrier)  # the same context into `_meta` and the headers
                meta.update(carrier)
            return {"content": []}

    wire = TracedDispatcher(Wire(), Upstream("fast", "tcp", HANDSHAKE), fast=True)
    # A peer's sampled context; with --sample, none (a peer that does not trace: the ratio decides).
    parent = (
        {} if args.sample is not None else {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    )
    inbound = Inbound(parent, "s", "tcp", "p")

    async def traced_call(i: int) -> None:
        with server_span("tools/call", "echo", HANDSHAKE, i, None, inbound, connection="fast") as done:
            done(await wire.answer("tools/call", {"name": "echo"}, {}))

    async def plain_call(i: int) -> None:
        return None  # tracing off: none of it runs

    provider: Any = trace.get_tracer_provider()
    calls = args.calls * 10
    for label, call in (("off", plain_call), ("on", traced_call)):
        for i in range(500):
            await call(i)
        provider.force_flush()
        started, loop_started = time.process_time(), time.thread_time()
        for i in range(calls):
            await call(i)
        loop = time.thread_time() - loop_started
        provider.force_flush()
        spent = (time.process_time() - started) / calls * 1e6
        print(
            f"{label}: {spent:.1f} us of CPU per call (all threads, export included; "
            f"{loop / calls * 1e6:.1f} us of it the caller's thread)"
        )
    print(f"the sink got {got[1]} exports, {got[0] / 1e6:.1f} MB")
    if args.parts:
        await parts(calls, traced_call, provider, server_span, inbound, client_span)


async def parts(calls: int, traced_call: Any, provider: Any, server_span: Any, inbound: Any, client_span: Any) -> None:
    """Where `--micro`'s figure goes: each piece timed alone on this thread, the collector's share, the encoding."""
    import gc

    from opentelemetry.propagate import inject
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from connections.client._tracing import _observer  # pyright: ignore[reportPrivateUsage]
    from connections.serving import Upstream
    from gateway.telemetry.durations import record_server
    from gateway.telemetry.otlp import encode_spans

    def timed(label: str, one: Any) -> None:
        provider.force_flush()
        started = time.thread_time()
        for i in range(calls):
            one(i)
        print(f"  {label}: {(time.thread_time() - started) / calls * 1e6:.1f} us")
        provider.force_flush()

    def server_alone(i: int) -> None:
        with server_span("tools/call", "echo", HANDSHAKE, i, None, inbound, connection="fast") as done:
            done({})

    def client_alone(i: int) -> None:
        with client_span("tools/call", "echo", "agent-sdk-1"):
            inject({})

    upstream = Upstream("fast", "tcp", HANDSHAKE)

    def histograms(i: int) -> None:
        record_server("tools/call", "tcp", HANDSHAKE, 0.001, None)
        for observe in _observer:
            observe(upstream, "tools/call", 0.001, None)

    print("parts, CPU of this thread per call:")
    timed("the server span (its record_server included)", server_alone)
    timed("the client span and its context written once", client_alone)
    timed("the four histogram records (two OpenTelemetry, two Prometheus)", histograms)
    gc.disable()
    provider.force_flush()
    started = time.process_time()
    for i in range(calls):
        await traced_call(i)
    provider.force_flush()
    gc.enable()
    print(
        "  the whole call with the garbage collector off: "
        f"{(time.process_time() - started) / calls * 1e6:.1f} us (all threads)"
    )
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    for i in range(256):
        await traced_call(i)
    spans = memory.get_finished_spans()
    started = time.thread_time()
    for _ in range(20):
        encode_spans(spans)
    print(f"  encoding for export: {(time.thread_time() - started) / 20 / len(spans) * 1e6:.1f} us a span (two a call)")


_SERVER_ATTRIBUTES = {
    "mcp.method.name": "tools/call",
    "mcp.protocol.version": MODERN,
    "jsonrpc.request.id": "7",
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "echo",
    "agent_sdk.connection": "fast",
    "network.transport": "tcp",
    "agent_sdk.principal": "loopback",
}
_CLIENT_ATTRIBUTES = {
    "mcp.method.name": "tools/call",
    "mcp.protocol.version": MODERN,
    "jsonrpc.request.id": "agent-sdk-7",
    "gen_ai.tool.name": "echo",
    "agent_sdk.connection": "fast",
    "network.transport": "tcp",
    "server.address": "127.0.0.1",
    "server.port": 8000,
}
_DURATION_ATTRIBUTES = {"mcp.method.name": "tools/call", "network.transport": "tcp", "mcp.protocol.version": MODERN}


def sdk_floor(calls: int) -> None:
    """The OpenTelemetry SDK alone, no code of ours: per call, a SERVER span and a CLIENT span under it with the
    attributes the conventions name, ended into the SDK's `BatchSpanProcessor` (its exporter drops the batch
    unencoded), and two `Histogram.record`s of the SDK's meter. The least that tracing a call through the SDK
    costs, before any encoding, propagation or export; CPU of all threads per call, the median of five runs."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind, set_span_in_context

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped(), max_queue_size=4096))
    tracer = provider.get_tracer("sdk-floor")
    meter = MeterProvider().get_meter("sdk-floor")
    server_duration = meter.create_histogram("mcp.server.operation.duration", unit="s")
    client_duration = meter.create_histogram("mcp.client.operation.duration", unit="s")

    def one() -> None:
        server = tracer.start_span("tools/call echo", None, SpanKind.SERVER, _SERVER_ATTRIBUTES)
        client = tracer.start_span("tools/call echo", set_span_in_context(server), SpanKind.CLIENT, _CLIENT_ATTRIBUTES)
        client.end()
        client_duration.record(0.001, _DURATION_ATTRIBUTES)
        server.end()
        server_duration.record(0.001, _DURATION_ATTRIBUTES)

    figures: list[float] = []
    for _ in range(6):
        started = time.process_time()
        for i in range(calls):
            one()
            if i % 1000 == 999:
                provider.force_flush()  # the queue never fills: no span is dropped unrecorded
        provider.force_flush()
        figures.append((time.process_time() - started) / calls * 1e6)
    print(
        f"the OpenTelemetry SDK alone (two spans, two histogram records, batch processor, no encoding): "
        f"{statistics.median(figures[1:]):.1f} us of CPU per call (runs: {', '.join(f'{f:.1f}' for f in figures[1:])})"
    )
    provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per phase")
    parser.add_argument("--rounds", type=int, default=4, help="phases per gateway and protocol version")
    parser.add_argument("--sample", type=float, default=None, help="trace this ratio of the calls (default: all)")
    parser.add_argument("--micro", action="store_true", help="time the tracing work alone, in this process")
    parser.add_argument("--parts", action="store_true", help="with --micro: where its time goes, piece by piece")
    parser.add_argument("--sdk-floor", action="store_true", help="the OpenTelemetry SDK's own cost, no code of ours")
    args = parser.parse_args()
    if args.sdk_floor:
        sdk_floor(max(args.calls, 10_000))
        return
    anyio.run(micro if args.micro else run, args)


if __name__ == "__main__":
    main()
