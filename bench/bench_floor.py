"""What a hop costs at the least, beside what the gateway costs, in one run: CPU per `tools/call` of each hop's
own process, on the fast upstream, 16 raw JSON-RPC clients per hop that stay open.

    .venv/bin/python bench/bench_floor.py                        # 2026-07-28, 30 s per hop in rotating phases
    .venv/bin/python bench/bench_floor.py --version 2025-11-25 --seconds 40

The hops, each in front of the same `bench/fast_upstream.py`:

- **nginx**: one worker, a keep-alive upstream block (as `bench_mcp_tools.py`): the floor one HTTP hop
  costs on this machine.
- **bare Python hop**: `bench/bare_hop.py`, uvicorn (httptools, uvloop) and an ASGI app that forwards the
  body over the gateway's own fast wire and writes the answer back, nothing else: the floor under any
  gateway written as this one is (uvicorn in, `_http1` out).
- **uvicorn only**: `bare_hop.py` with no upstream, answering a fixed result: the inbound half.
- **wire only**: the same fast wire driven by this process's clients straight to the upstream (16 tasks):
  the outbound half of the bare hop, measured in this process (so the clients' HTTP is not in it).
- **agent-sdk**: `agent-sdk serve` on a project whose one connection advertises the upstream. With `--full`,
  as a team runs it: a permit-all `agent/policies.cedar`, a `--bearer-token` every client sends (the audit
  file is always on).
- With `--granian`, also: the bare hop on Granian's ASGI and RSGI interfaces, and the gateway's app on
  Granian's ASGI (`bench/granian_gateway.py`): the front as a choice (docs/architecture.md). A Granian hop's
  CPU is its whole process tree (Granian runs its worker as a child).

Phases of 320 calls rotate over the hops until each has had `--seconds`; CPU per call is `/proc`'s utime +
stime of the hop's process over its phases, divided by its calls. Figures and their reading:
docs/performance.md, "The floor under a Python hop".
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
import pydantic_core

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import harness as bench
from bench.bench_mcp_tools import nginx_conf, workers
from connections.client._transports._http1 import Http1Origin

CLIENTS = 16
PHASE = 320
BARE_HOP = Path(__file__).resolve().parent / "bare_hop.py"
GRANIAN_GATEWAY = Path(__file__).resolve().parent / "granian_gateway.py"


class WirePeer:
    """One task of the wire-only path: the fast wire's request and answer, straight to the upstream."""

    def __init__(self, origin: Http1Origin, version: str) -> None:
        self.origin, self.version, self.next_id = origin, version, 0
        self.headers = [("accept", "application/json, text/event-stream"), ("content-type", "application/json")]
        if version == bench.MODERN:
            self.headers += [("mcp-protocol-version", version), ("mcp-method", "tools/call"), ("mcp-name", "echo")]

    async def open(self) -> None:
        if self.version != bench.MODERN:  # the fast upstream is stateless: its handshake-era calls need no session
            self.headers.append(("mcp-protocol-version", self.version))

    async def call(self) -> float:
        self.next_id += 1
        params: dict[str, object] = {"name": "echo", "arguments": {"message": "benchmark"}}
        if self.version == bench.MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": bench.MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            }
        body = pydantic_core.to_json({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params})
        start = time.perf_counter()
        response = await self.origin.request("POST", self.headers, body)
        try:
            answer, _ = await response.read_json()
        finally:
            response.release()
        elapsed = time.perf_counter() - start
        if response.status != 200 or "error" in answer:
            raise RuntimeError(f"the wire-only call failed: {response.status} {answer}")
        return elapsed


TOKEN = "bench-floor-token-6f1d2c9e8a7b"


async def drive(
    hops: dict[str, tuple[str | None, list[int]]], upstream: str, seconds: float, version: str, full: bool
) -> None:
    """Rotate phases over `hops` (name: URL, or None for the wire-only path; the pids whose CPU is its own)."""
    clients = [httpx2.AsyncClient(timeout=60) for _ in range(CLIENTS * len(hops))]
    origin = Http1Origin(upstream, ssl_context=None, connect_timeout=5.0)
    peers: dict[str, list[object]] = {}
    for j, (name, (url, _)) in enumerate(hops.items()):
        group: list[object] = []
        for i in range(CLIENTS):
            token = TOKEN if full and "agent-sdk" in name else None
            peer = (
                WirePeer(origin, version)
                if url is None
                else bench.RawPeer(url, clients[j * CLIENTS + i], version, token=token)
            )
            await peer.open()
            group.append(peer)
        await bench.phase(group, PHASE, [])  # warm-up
        peers[name] = group
    spent = dict.fromkeys(hops, 0.0)
    calls = dict.fromkeys(hops, 0)
    latencies: dict[str, list[float]] = {name: [] for name in hops}
    deadline = time.monotonic() + seconds * len(hops)
    order = list(hops)
    load = os.getloadavg()[0]
    while time.monotonic() < deadline:
        for name in order:
            pids = hops[name][1]
            if "granian" in name:  # its worker is a child process
                pids = [p for pid in pids for p in (pid, *bench.children(pid))]
            before = sum(bench.cpu_seconds(pid) for pid in pids)
            await bench.phase(peers[name], PHASE, latencies[name])
            spent[name] += sum(bench.cpu_seconds(pid) for pid in pids) - before
            calls[name] += PHASE
        order = order[1:] + order[:1]
    on = "policy, audit and a bearer token on" if full else "no policy file, no token (loopback)"
    print(f"peers speak {version}; {CLIENTS} clients per hop; gateway: {on}; "
          f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| hop | calls | hop CPU per call | x nginx | minus the bare hop | p50 |")
    print("|---|---:|---:|---:|---:|---:|")
    floor = spent["nginx"] / calls["nginx"]
    bare = spent["bare Python hop"] / calls["bare Python hop"]
    for name in hops:
        per = spent[name] / calls[name]
        p50 = bench.pct(latencies[name], 0.5) * 1000
        over = f"{(per - bare) * 1000:+.3f} ms" if "agent-sdk" in name else ""
        print(f"| {name} | {calls[name]} | {per * 1000:.3f} ms | {per / floor:.2f}x | {over} | {p50:.1f} ms |")
    await origin.aclose()
    for client in clients:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of phases per hop")
    parser.add_argument("--version", choices=(bench.HANDSHAKE, bench.MODERN), default=bench.MODERN)
    parser.add_argument("--full", action="store_true", help="the gateway with a permit-all policy and a bearer token")
    parser.add_argument("--granian", action="store_true", help="also the bare hop and the gateway on Granian")
    args = parser.parse_args()
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        raise SystemExit("nginx is not installed; run `bash scripts/test` once")
    procs: list[subprocess.Popen[bytes]] = []

    def start(cmd: list[str], port: int, what: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        bench.wait_port(port, procs[-1], what)
        return procs[-1]

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        try:
            up_port = bench.free_port()
            start([sys.executable, str(bench.FAST_UPSTREAM), str(up_port)], up_port, "fast upstream")
            upstream = f"http://127.0.0.1:{up_port}/mcp"
            ng_port = bench.free_port()
            master = start([nginx, "-p", str(tmp), "-c", str(nginx_conf(tmp, ng_port, up_port)), "-g", "daemon off;"],
                           ng_port, "nginx")  # fmt: skip
            bare_port = bench.free_port()
            bare = start([sys.executable, str(BARE_HOP), str(bare_port), upstream], bare_port, "bare hop")
            fixed_port = bench.free_port()
            fixed = start([sys.executable, str(BARE_HOP), str(fixed_port), "-"], fixed_port, "uvicorn alone")
            project = tmp / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            (project / "agent" / "mcp-connections" / "upstream.py").write_text(
                "from connections import define_connection\n\n"
                f"connection = define_connection(url={upstream!r}, advertise_tools=True)\n"
            )
            if args.full:
                (project / "agent" / "policies.cedar").write_text("permit(principal, action, resource);\n")
            flags = ("--bearer-token", TOKEN) if args.full else ()
            gateway, gw_port = bench.start_serve(project, tmp / "state", *flags)
            procs.append(gateway)
            hops: dict[str, tuple[str | None, list[int]]] = {
                "nginx": (f"http://127.0.0.1:{ng_port}/mcp", [master.pid, *workers(master.pid)]),
                "bare Python hop": (f"http://127.0.0.1:{bare_port}/mcp", [bare.pid]),
                "uvicorn only": (f"http://127.0.0.1:{fixed_port}/mcp", [fixed.pid]),
                "wire only": (None, [os.getpid()]),
                "agent-sdk": (f"http://127.0.0.1:{gw_port}/v1/mcp/tools", [gateway.pid]),
            }
            if args.granian:
                env = {**os.environ, "PYTHONPATH": str(BARE_HOP.parent.parent)}
                for interface in ("asgi", "rsgi"):
                    port = bench.free_port()
                    proc = start([sys.executable, str(BARE_HOP), str(port), upstream, f"granian-{interface}"], port,
                                 f"bare hop on granian {interface}", env)  # fmt: skip
                    hops[f"bare hop, granian {interface}"] = (f"http://127.0.0.1:{port}/mcp", [proc.pid])
                port = bench.free_port()
                token = (TOKEN,) if args.full else ()
                cmd = [sys.executable, str(GRANIAN_GATEWAY), str(port), str(project), str(tmp / "gstate"), *token]
                proc = start(cmd, port, "the gateway on granian", env)
                hops["agent-sdk, granian asgi"] = (f"http://127.0.0.1:{port}/v1/mcp/tools", [proc.pid])
            anyio.run(drive, hops, upstream, args.seconds, args.version, args.full, backend="asyncio",
                      backend_options={"use_uvloop": True})  # fmt: skip
        finally:
            bench.stop_all(procs)


if __name__ == "__main__":
    main()
