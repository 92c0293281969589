"""Two gateways in one run: the CPU per `/v1/mcp/tools` passthrough call of another checkout (A)
against this one (B), over one upstream, phases alternating, so machine drift hits both alike.

    git worktree add /tmp/base <commit>
    .venv/bin/python bench/bench_gateway_ab.py --base /tmp/base              # 30 s
    .venv/bin/python bench/bench_gateway_ab.py --base /tmp/base --seconds 60
    .venv/bin/python bench/bench_gateway_ab.py --base /tmp/base --full   # a permit-all policy and a bearer token on

Upstream (`--upstream`): the fast `mcp` 2.x server of `bench/fast_upstream.py` (default) or
`server-everything streamableHttp`, its `echo` tool; each gateway is `agent-sdk serve` on a project
whose one connection advertises it, driven by 16 raw JSON-RPC clients at `--version` (2025-11-25
or 2026-07-28) as `bench_mcp_tools.py` drives one. Prints each gateway's CPU per call (from `/proc`
around each of its phases), B/A, what the upstream and the clients spent per call while each
gateway ran (a gateway's answers cost its neighbours too), and the p50 and p99 latency of each.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as bench

CLIENTS = 16
PHASE = 320


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


TOKEN = "bench-ab-token-5e2a9c1f7d3b"


def start_gateway(checkout: Path, project: Path, state: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    port = bench.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    code = "from gateway.cli import entrypoint; entrypoint()"
    cmd = [sys.executable, "-c", code, "serve", "--dir", str(project), "--port", str(port), "--state-root", str(state)]
    cmd += flags
    proc = subprocess.Popen(
        cmd,
        env={**env, "PYTHONPATH": str(checkout)},
        cwd=checkout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bench.wait_port(port, proc, f"gateway from {checkout}")
    return proc, f"http://127.0.0.1:{port}/v1/mcp/tools"


async def drive(
    urls: list[str], pids: list[int], upstream: int, seconds: float, version: str, token: str | None
) -> None:
    clients = [httpx2.AsyncClient(timeout=60) for _ in range(CLIENTS * len(urls))]
    peers = [
        [bench.RawPeer(url, clients[j * CLIENTS + i], version, token=token) for i in range(CLIENTS)]
        for j, url in enumerate(urls)
    ]
    for group in peers:
        for peer in group:
            await peer.open()
        await bench.phase(group, PHASE, [])  # warm-up
    spent, calls = [0.0] * len(urls), [0] * len(urls)
    others = (upstream, os.getpid())  # the upstream and the clients: what a gateway's answers cost them
    spent_others = [[0.0, 0.0] for _ in urls]
    latencies: list[list[float]] = [[] for _ in urls]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for j, group in enumerate(peers):
            before = cpu_seconds(pids[j])
            before_others = [cpu_seconds(pid) for pid in others]
            await bench.phase(group, PHASE, latencies[j])
            spent[j] += cpu_seconds(pids[j]) - before
            for k, pid in enumerate(others):
                spent_others[j][k] += cpu_seconds(pid) - before_others[k]
            calls[j] += PHASE
    a, b = (spent[j] / calls[j] * 1000 for j in (0, 1))
    p50 = [bench.pct(samples, 0.5) * 1000 for samples in latencies]
    print(f"{calls[0]} calls each, {CLIENTS} raw clients per gateway")
    print(f"gateway CPU per call: A (base) {a:.3f} ms, B (this checkout) {b:.3f} ms, B/A {b / a:.3f}")
    up, cl = ([spent_others[j][k] / calls[j] * 1000 for j in (0, 1)] for k in (0, 1))
    print(f"upstream CPU per call: A {up[0]:.3f} ms, B {up[1]:.3f} ms; clients: A {cl[0]:.3f} ms, B {cl[1]:.3f} ms")
    total = [a + up[0] + cl[0], b + up[1] + cl[1]]
    print(f"all three per call: A {total[0]:.3f} ms, B {total[1]:.3f} ms, B/A {total[1] / total[0]:.3f}")
    p99 = [bench.pct(samples, 0.99) * 1000 for samples in latencies]
    print(f"p50: A {p50[0]:.1f} ms, B {p50[1]:.1f} ms; p99: A {p99[0]:.1f} ms, B {p99[1]:.1f} ms")
    for client in clients:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="checkout of the gateway to compare against (A)")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--upstream", choices=("fast", "everything"), default="fast")
    parser.add_argument("--version", choices=(bench.HANDSHAKE, bench.MODERN), default=bench.HANDSHAKE)
    parser.add_argument("--full", action="store_true", help="a permit-all agent/policies.cedar and a bearer token")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        up_port = bench.free_port()
        if args.upstream == "fast":
            cmd = [sys.executable, str(bench.FAST_UPSTREAM), str(up_port)]
        else:
            cmd = [str(bench.EVERYTHING), "streamableHttp"]
        upstream = subprocess.Popen(
            cmd, env={**os.environ, "PORT": str(up_port)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        procs = [upstream]
        try:
            bench.wait_port(up_port, upstream, args.upstream)
            project = Path(tmp) / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            (project / "agent" / "mcp-connections" / "everything.py").write_text(
                "from connections import define_connection\n\n"
                f"connection = define_connection(url='http://127.0.0.1:{up_port}/mcp', advertise_tools=True)\n"
            )
            if args.full:
                (project / "agent" / "policies.cedar").write_text("permit(principal, action, resource);\n")
            flags = ("--bearer-token", TOKEN) if args.full else ()
            urls: list[str] = []
            for name, checkout in (("a", args.base.resolve()), ("b", bench.ROOT)):
                proc, url = start_gateway(checkout, project, Path(tmp) / f"state-{name}", *flags)
                procs.append(proc)
                urls.append(url)
            anyio.run(drive, urls, [p.pid for p in procs[1:]], upstream.pid, args.seconds, args.version,
                      TOKEN if args.full else None)  # fmt: skip
        finally:
            bench.stop_all(procs)


if __name__ == "__main__":
    main()
