"""`tools/call` through `/v1/mcp/tools` against the same call made directly to the upstream and
through a plain nginx reverse-proxy hop, for both MCP protocol generations, in one run.

    .venv/bin/python bench/bench_mcp_tools.py                        # fast upstream, both generations, one run
    .venv/bin/python bench/bench_mcp_tools.py --runs 3               # three runs (the figures of docs/performance.md)
    .venv/bin/python bench/bench_mcp_tools.py --upstream everything  # server-everything, the slow realistic one
    .venv/bin/python bench/bench_mcp_tools.py --py-spy /tmp/serve.txt  # and sample the gateway with py-spy

Upstream (`--upstream`): `fast` (default) is `bench/fast_upstream.py`, an `mcp` 2.x `MCPServer` in
stateless JSON mode with an `echo` tool, speaking 2026-07-28 and the handshake versions;
`everything` is `@modelcontextprotocol/server-everything streamableHttp` (handshake only, SSE
answers, about 1 ms of CPU per call). The gateway is `agent-sdk serve` (a subprocess, loopback-strict
auth) on a project whose one connection advertises the upstream. The floor is nginx (one worker)
with `proxy_pass` to an upstream block with `keepalive`, `proxy_http_version 1.1`, `Connection ""`
and `Host $http_host`: what one plain HTTP hop costs on this machine.

Clients (`--clients`): `auto` is the `mcp` 2.x `Client` in its default mode (it speaks 2026-07-28 to
every path that can), `legacy` the same `Client` with `mode="legacy"` (the 2025-11-25 handshake);
`raw` and `raw-2026` post plain JSON-RPC (2025-11-25, 2026-07-28) on one keep-alive connection each.
For each kind, `--concurrency` clients per path are opened once and stay open for the whole run, as
agents do. Each round then runs, for every path in a rotating order, a throughput phase (every
client calling back to back for `--seconds`), then a sequential phase: one client per path (the
others open and idle) making one call at a time, the paths taken in turn call by call for
`--seq-seconds` per path, so drift on a busy machine hits every path alike. Per path: calls/s,
p50/p99 under load, the single client's sequential p50, and the CPU seconds per call of every
process (`/proc/<pid>/stat` utime + stime over the phases, divided by the calls; in the sequential
phase only a hop's own process, which works for its path alone).
Prints Markdown; `--json FILE` also writes every figure. The issue-27 targets are checked at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.harness import (  # noqa: E402
    EVERYTHING,
    FAST_UPSTREAM,
    HANDSHAKE,
    MODERN,
    RawPeer,
    SdkPeer,
    children,
    cpu_tree,
    free_port,
    pct,
    wait_port,
)
from tests.nginx import main_conf  # noqa: E402

CLIENTS = ("auto", "legacy", "raw", "raw-2026")
DIRECT, GATEWAY, NGINX, FASTMCP = "direct", "agent-sdk /v1/mcp/tools", "nginx hop", "fastmcp create_proxy"
HOPS = {GATEWAY: "agent-sdk", NGINX: "nginx", FASTMCP: "fastmcp"}  # each hop path's own process
# Issue 27's "done when", on the fast upstream, for both peer generations.
TARGET_CPU_MS, TARGET_RATE, TARGET_SEQ_P50 = 0.20, 0.85, 1.25


ARGUMENTS = {"message": "benchmark"}


@dataclass
class PathFigures:
    """What one path measured over a run: samples, wall time and CPU per role, for both phase kinds."""

    samples: list[float] = field(default_factory=list[float])
    wall: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict[str, float])
    sequential: list[float] = field(default_factory=list[float])
    seq_hop_cpu: float = 0.0
    """CPU seconds of this path's own hop process (the gateway, nginx) in the sequential phases."""
    version: str = ""
    phases: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    """Each throughput phase: when it started (time.time()), its calls, its CPU ms per call by role."""

    def summary(self) -> dict[str, Any]:
        calls, seq = len(self.samples), len(self.sequential)
        return {
            "calls": calls,
            "rate": calls / self.wall,
            "p50": statistics.median(self.samples),
            "p99": pct(self.samples, 0.99),
            "seq_calls": seq,
            "seq_p50": statistics.median(self.sequential),
            "cpu_ms": {role: spent / calls * 1000 for role, spent in self.cpu.items()},
            "seq_hop_cpu_ms": self.seq_hop_cpu / seq * 1000,
            "version": self.version,
            "phases": self.phases,
        }


async def timed_phase(peers: list[Any], seconds: float, samples: list[float]) -> tuple[float, int]:
    """Every peer calls back to back until `seconds` have passed (the calls in flight then finish):
    the phase's wall time and its number of calls."""
    before = len(samples)
    deadline = time.perf_counter() + seconds

    async def worker(peer: Any) -> None:
        while time.perf_counter() < deadline:
            samples.append(await peer.call())

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for peer in peers:
            tg.start_soon(worker, peer)
    return time.perf_counter() - start, len(samples) - before


async def interleaved(peers: dict[str, Any], seconds: float, figures: dict[str, PathFigures]) -> None:
    """One client per path, one call at a time, taking the paths in turn (the order rotating each
    turn) until `seconds` have passed: a single client's sequential latency, every path within
    milliseconds of the others, so the box's drift hits them alike."""
    order = list(peers)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for name in order:
            figures[name].sequential.append(await peers[name].call())
        order = order[1:] + order[:1]


def cpu_now(pids: dict[str, list[int]]) -> dict[str, float]:
    return {role: cpu_tree(group) for role, group in pids.items()}


def add_spent(into: dict[str, float], before: dict[str, float], pids: dict[str, list[int]]) -> None:
    for role, now in cpu_now(pids).items():
        into[role] = into.get(role, 0.0) + now - before[role]


async def open_peers(stack: AsyncExitStack, url: str, kind: str, count: int) -> tuple[list[Any], str]:
    """`count` peers of `kind` on `url`, each on its own HTTP client, open until `stack` closes;
    and the protocol version they speak there."""
    peers: list[Any] = []
    for _ in range(count):
        http = await stack.enter_async_context(httpx2.AsyncClient(timeout=60))
        if kind in ("auto", "legacy"):
            peer: Any = SdkPeer(url, http, kind)
            await stack.enter_async_context(peer.client)
        else:
            peer = RawPeer(url, http, MODERN if kind == "raw-2026" else HANDSHAKE)
            await peer.open()
        peers.append(peer)
    first = peers[0]
    version = first.client.protocol_version if isinstance(first, SdkPeer) else first.version
    return peers, version


async def measure(
    urls: dict[str, str], kind: str, pids: dict[str, list[int]], args: argparse.Namespace
) -> dict[str, Any]:
    """One run of one client kind over every path (module docstring); its figures per path."""
    figures = {name: PathFigures() for name in urls}
    async with AsyncExitStack() as stack:
        peers: dict[str, list[Any]] = {}
        for name, url in urls.items():
            peers[name], figures[name].version = await open_peers(stack, url, kind, args.concurrency)
        for name in urls:  # warm every path: connections, pools, listings, caches
            await timed_phase(peers[name], args.warm, [])
        order = list(urls)
        for _ in range(args.rounds):
            for name in order:
                path = figures[name]
                before, at = cpu_now(pids), time.time()
                wall, calls = await timed_phase(peers[name], args.seconds, path.samples)
                path.wall += wall
                spent: dict[str, float] = {}
                add_spent(spent, before, pids)
                for role, seconds in spent.items():
                    path.cpu[role] = path.cpu.get(role, 0.0) + seconds
                cpu_ms = {role: seconds / calls * 1000 for role, seconds in spent.items()}
                path.phases.append({"at": at, "calls": calls, "wall": wall, "cpu_ms": cpu_ms})
            order = order[1:] + order[:1]
            before = cpu_now(pids)
            await interleaved({name: peers[name][0] for name in urls}, args.seq_seconds * len(urls), figures)
            spent = {}
            add_spent(spent, before, pids)
            for name, path in figures.items():  # a hop's process works only for its own path's calls
                if (role := HOPS.get(name)) in spent:
                    path.seq_hop_cpu += spent[role]
    return {name: path.summary() for name, path in figures.items()}


def nginx_conf(tmp: Path, port: int, upstream_port: int) -> Path:
    """One worker, a keep-alive upstream block: the plain reverse-proxy hop (docs/performance.md)."""
    conf = tmp / "nginx.conf"
    conf.write_text(
        main_conf(
            tmp,
            f"""access_log off;
    upstream mcp {{ server 127.0.0.1:{upstream_port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://mcp;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
        }}
    }}""",
        )
    )
    return conf


def workers(master: int) -> list[int]:
    """nginx's worker processes: the master listens before it forks them, so wait for one."""
    deadline = time.monotonic() + 10
    while not (found := children(master)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not found:
        raise SystemExit("nginx started no worker process")
    return found


def start(
    procs: list[subprocess.Popen[bytes]], cmd: list[str], port: int, what: str, env: dict[str, str] | None = None
) -> int:
    procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
    wait_port(port, procs[-1], what)
    return procs[-1].pid


def stop(procs: list[subprocess.Popen[bytes]], spied: int | None) -> None:
    """Every process, last started first; a process py-spy records is stopped first, so py-spy sees it
    exit and writes its file."""
    if spied is not None:
        os.kill(spied, signal.SIGTERM)
    for proc in reversed(procs):
        if spied is None or Path(str(proc.args[0])).name != "py-spy":  # pyright: ignore[reportIndexIssue]
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def project_for(tmp: Path, upstream: str) -> Path:
    """A project whose one connection advertises `upstream`'s tools."""
    project = tmp / "project"
    (project / "agent" / "mcp-connections").mkdir(parents=True)
    (project / "agent" / "mcp-connections" / "upstream.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={upstream!r}, advertise_tools=True)\n"
    )
    return project


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole measurement (same processes)")
    parser.add_argument("--rounds", type=int, default=3, help="rotations over the paths per run and client kind")
    parser.add_argument("--seconds", type=float, default=2.0, help="each throughput phase")
    parser.add_argument(
        "--seq-seconds", type=float, default=2.0, help="per path and round: one client per path, calls interleaved"
    )
    parser.add_argument("--warm", type=float, default=1.0, help="seconds of warm-up per path and client kind")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--upstream", choices=("fast", "everything"), default="fast")
    parser.add_argument("--clients", default="auto,legacy", help=f"comma-separated, from {', '.join(CLIENTS)}")
    parser.add_argument("--fastmcp", action="store_true", help="add FastMCP's create_proxy as a path")
    parser.add_argument("--no-nginx", action="store_true", help="leave the nginx hop out")
    parser.add_argument("--py-spy", type=Path, help="record the gateway with py-spy (raw collapsed stacks) here")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="pass this to agent-sdk serve (repeat; e.g. =--flag=value)"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    kinds = [k.strip() for k in args.clients.split(",") if k.strip()]
    if unknown := set(kinds) - set(CLIENTS):
        raise SystemExit(f"unknown client kind(s): {', '.join(sorted(unknown))}; choose from {', '.join(CLIENTS)}")
    if args.upstream == "everything" and not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing; run `bash scripts/test` once to install the peers")
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None and not args.no_nginx:
        raise SystemExit("nginx is not installed; run `bash scripts/test` once (or pass --no-nginx)")
    py_spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if args.py_spy and py_spy is None:
        raise SystemExit("py-spy is not installed: .venv/bin/python -m pip install py-spy")

    procs: list[subprocess.Popen[bytes]] = []
    spied: int | None = None
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        try:
            up_port = free_port()
            if args.upstream == "fast":
                cmd = [sys.executable, str(FAST_UPSTREAM), str(up_port)]
                pids = {"upstream": [start(procs, cmd, up_port, "fast upstream")]}
            else:
                env = {**os.environ, "PORT": str(up_port)}
                cmd = [str(EVERYTHING), "streamableHttp"]
                pids = {"upstream": [start(procs, cmd, up_port, "mcp-server-everything", env=env)]}
            upstream = f"http://127.0.0.1:{up_port}/mcp"

            gw_port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
            serve = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve"]
            serve += ["--dir", str(project_for(tmp, upstream)), "--port", str(gw_port)]
            serve += ["--state-root", str(tmp / "state"), *args.serve_arg]
            if args.py_spy:
                assert py_spy is not None
                spy = ["py-spy", "record", "--nonblocking", "--rate", "400", "--format", "raw", "-o", str(args.py_spy)]
                serve = [*spy, "--", *serve]
                serve[0] = py_spy
            gateway = start(procs, serve, gw_port, "agent-sdk serve", env={**env, "PYTHONPATH": str(ROOT)})
            if args.py_spy:
                spied = children(gateway)[0]
                gateway = spied
            pids["agent-sdk"] = [gateway]
            serving = time.time()  # the gateway's toolset listing is reused for 30 s from about now
            urls = {DIRECT: upstream, GATEWAY: f"http://127.0.0.1:{gw_port}/v1/mcp/tools"}

            if not args.no_nginx:
                assert nginx is not None
                ng_port = free_port()
                conf = nginx_conf(tmp, ng_port, up_port)
                master = start(procs, [nginx, "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"], ng_port, "nginx")
                pids["nginx"] = [master, *workers(master)]
                urls[NGINX] = f"http://127.0.0.1:{ng_port}/mcp"

            if args.fastmcp:
                fm_port = free_port()
                script = (
                    "import sys\nfrom fastmcp.server import create_proxy\n"
                    "proxy = create_proxy(sys.argv[1])\n"
                    "proxy.run(transport='http', host='127.0.0.1', port=int(sys.argv[2]), path='/mcp', "
                    "show_banner=False, log_level='WARNING')\n"
                )
                cmd = [sys.executable, "-c", script, upstream, str(fm_port)]
                pids["fastmcp"] = [start(procs, cmd, fm_port, "fastmcp proxy")]
                urls[FASTMCP] = f"http://127.0.0.1:{fm_port}/mcp"

            pids["clients"] = [os.getpid()]
            for run in range(args.runs):
                results: dict[str, Any] = {"load": list(os.getloadavg()), "started": time.time(), "serving": serving}
                for kind in kinds:
                    results[kind] = anyio.run(measure, urls, kind, pids, args)
                    report(run, kind, results[kind], args)
                results["load_after"] = list(os.getloadavg())
                runs.append(results)
        finally:
            stop(procs, spied)
    summary(runs, kinds, args)
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs}, indent=1))


def report(run: int, kind: str, results: dict[str, Any], args: argparse.Namespace) -> None:
    direct = results[DIRECT]
    print(
        f"\n### run {run + 1}, {kind} clients: tools/call echo, {args.upstream} upstream, {args.concurrency} "
        f"clients open per path, {args.rounds} rounds of {args.seconds:g} s per path + {args.seq_seconds:g} s "
        "sequential"
        f" (load average {os.getloadavg()[0]:.2f})\n"
    )
    print("| path | speaks | calls/s | vs direct | p50 ms | p99 ms | sequential p50 ms | vs direct |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['version']} | {r['rate']:.0f} | {r['rate'] / direct['rate']:.3f}x | "
            f"{r['p50'] * 1000:.2f} | {r['p99'] * 1000:.2f} | {r['seq_p50'] * 1000:.3f} | "
            f"{r['seq_p50'] / direct['seq_p50']:.3f}x |"
        )
    roles = list(direct["cpu_ms"])
    print(
        "\nCPU ms per call, by process, while each path ran (16 clients; the hop alone with one client in brackets):\n"
    )
    print("| path | " + " | ".join(roles) + " | all |")
    print("|---|" + "---:|" * (len(roles) + 1))
    for name, r in results.items():
        cells = [f"{r['cpu_ms'][role]:.3f}" for role in roles]
        if name in HOPS:  # its own process, alone with one client
            cells[roles.index(HOPS[name])] += f" ({r['seq_hop_cpu_ms']:.3f})"
        print(f"| {name} | " + " | ".join(cells) + f" | {sum(r['cpu_ms'].values()):.3f} |")
    sys.stdout.flush()


def summary(runs: list[dict[str, Any]], kinds: list[str], args: argparse.Namespace) -> None:
    """Per client kind and run: the three issue-27 figures for the gateway, the nginx hop beside them."""
    print("\n### every run: calls/s vs direct, sequential p50 vs direct, CPU ms per call of the hop\n")
    print(
        "| run | load | clients | agent-sdk calls/s | seq p50 | gateway CPU ms "
        "| nginx calls/s | seq p50 | nginx CPU ms |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for i, results in enumerate(runs, 1):
        load = f"{results['load'][0]:.1f}→{results['load_after'][0]:.1f}"
        for kind in kinds:
            d, cells = results[kind][DIRECT], []
            for name, role in ((GATEWAY, "agent-sdk"), (NGINX, "nginx")):
                if name not in results[kind]:
                    continue
                r = results[kind][name]
                rate, seq = r["rate"] / d["rate"], r["seq_p50"] / d["seq_p50"]
                cells += [f"{rate:.2f}x", f"{seq:.2f}x", f"{r['cpu_ms'][role]:.3f}"]
            print(f"| {i} | {load} | {kind} | " + " | ".join(cells) + " |")
    if args.upstream != "fast":
        return
    print(
        f"\nTargets (issue 27, fast upstream): gateway CPU per call <= {TARGET_CPU_MS} ms, calls/s >= "
        f"{TARGET_RATE}x direct, sequential p50 <= {TARGET_SEQ_P50}x direct."
    )
    for kind in kinds:
        met = [0, 0, 0]
        for results in runs:
            d, g = results[kind][DIRECT], results[kind][GATEWAY]
            met[0] += g["cpu_ms"]["agent-sdk"] <= TARGET_CPU_MS
            met[1] += g["rate"] / d["rate"] >= TARGET_RATE
            met[2] += g["seq_p50"] / d["seq_p50"] <= TARGET_SEQ_P50
        print(f"- {kind}: CPU met in {met[0]} of {len(runs)} runs, calls/s in {met[1]}, sequential p50 in {met[2]}")


if __name__ == "__main__":
    main()
