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
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mcp_tools import (
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per phase")
    parser.add_argument("--rounds", type=int, default=4, help="phases per gateway and protocol version")
    parser.add_argument("--sample", type=float, default=None, help="trace this ratio of the calls (default: all)")
    anyio.run(run, parser.parse_args())


if __name__ == "__main__":
    main()
