"""`tools/call` through `/v1/mcp/tools` against the same call made directly to the upstream and
through a plain nginx reverse-proxy hop, for both MCP protocol generations, in one run.

    .venv/bin/python bench/bench_mcp_tools.py                        # fast upstream; auto, legacy, raw clients
    .venv/bin/python bench/bench_mcp_tools.py --runs 3 --calls 3200  # three runs, each interleaved
    .venv/bin/python bench/bench_mcp_tools.py --upstream everything  # server-everything, the realistic one
    .venv/bin/python bench/bench_mcp_tools.py --fastmcp               # FastMCP's create_proxy as a fourth path

Upstream (`--upstream`): `fast` (default) is `bench/fast_upstream.py`, an `mcp` 2.x `MCPServer` in
stateless JSON mode with an `echo` tool, speaking 2026-07-28 and the handshake versions;
`everything` is `@modelcontextprotocol/server-everything streamableHttp` (handshake only, SSE
answers, about 1 ms of CPU per call). The gateway is `agent-sdk serve` (a subprocess, loopback-strict
auth) on a project whose one connection advertises the upstream. The floor is nginx (one worker)
with `proxy_pass` to an upstream block with `keepalive`, `proxy_http_version 1.1`, `Connection ""`
and `Host $http_host`: what one plain HTTP hop costs on this machine.

Clients (`--clients`, 16 concurrent each): `auto` is the `mcp` 2.x `Client` in its default mode (it
speaks 2026-07-28 to every path here), `legacy` the same `Client` with `mode="legacy"` (the
2025-11-25 handshake), `raw` plain JSON-RPC posts at 2025-11-25 on one keep-alive connection per
client and path (the client costs the same on every path, so this one measures the servers),
`raw-2026` the same at 2026-07-28. For each client kind, phases of `--phase` calls alternate
between the paths (rotating the order each round), so drift on a busy machine hits every path
alike. Prints Markdown tables: latency and rate per path, and CPU per call of every process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
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
from tests.nginx import main_conf  # noqa: E402

PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))
EVERYTHING = PEERS / "node_modules" / ".bin" / "mcp-server-everything"
FAST_UPSTREAM = ROOT / "bench" / "fast_upstream.py"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
CLIENTS = ("auto", "legacy", "raw", "raw-2026")
ARGUMENTS = {"message": "benchmark"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"{what} did not listen on {port}")


def start_listening(cmd: list[str], port: int, what: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """`cmd` (output discarded) with `env` added to ours, once it listens on `port`."""
    proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port, proc, what)
    return proc


def start_serve(project: Path, state_root: Path, *flags: str) -> tuple[subprocess.Popen[bytes], int]:
    """`agent-sdk serve` on `project` (a subprocess, no `AGENT_SDK_*` variables, output discarded) and its port,
    once it listens."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve", "--dir", str(project)]
    cmd += ["--port", str(port), "--state-root", str(state_root), *flags]
    proc = subprocess.Popen(
        cmd, env={**env, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_port(port, proc, "agent-sdk serve")
    return proc, port


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _decode(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if "id" in message:
                    return message
        raise RuntimeError("no response in the event stream")
    return response.json()


@dataclass
class RawPeer:
    """One client's keep-alive connection to one path, posting JSON-RPC itself (`version`'s rules)."""

    url: str
    http: httpx2.AsyncClient
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    next_id: int = 0

    async def open(self) -> None:
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.version == MODERN:  # no handshake: every request carries its envelope and routing headers
            self.headers |= {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
            return
        init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        response = await self.http.post(self.url, json=self._request("initialize", init), headers=self.headers)
        response.raise_for_status()
        if "mcp-session-id" in response.headers:
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = HANDSHAKE
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post(self.url, json=note, headers=self.headers)

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def call(self) -> float:
        params: dict[str, Any] = {"name": "echo", "arguments": ARGUMENTS}
        if self.version == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            }
        start = time.perf_counter()
        response = await self.http.post(self.url, json=self._request("tools/call", params), headers=self.headers)
        message = _decode(response)
        elapsed = time.perf_counter() - start
        if "error" in message or message["result"].get("isError"):
            raise RuntimeError(f"{self.url}: {message}")
        return elapsed


class SdkPeer:
    """The same through the `mcp` 2.x `Client` (`mode`: "auto" or "legacy"), one session per client and path."""

    def __init__(self, url: str, http: httpx2.AsyncClient, mode: str) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self.client = Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)  # pyright: ignore[reportArgumentType]

    async def call(self) -> float:
        start = time.perf_counter()
        result = await self.client.call_tool("echo", ARGUMENTS)
        elapsed = time.perf_counter() - start
        if result.is_error:
            raise RuntimeError(f"error result: {result}")
        return elapsed


async def phase(peers: list[Any], calls: int, samples: list[float]) -> float:
    """`calls` calls spread over the peers (one in flight per peer); the phase's wall time."""
    remaining = calls

    async def worker(peer: Any) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            samples.append(await peer.call())

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for peer in peers:
            tg.start_soon(worker, peer)
    return time.perf_counter() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (Linux `/proc`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_tree(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


async def measure(
    urls: dict[str, str], calls: int, concurrency: int, phase_size: int, kind: str, pids: dict[str, list[int]]
) -> dict[str, dict[str, float]]:
    """Latency and rate per path for one client kind; each role's CPU per call on each path."""
    clients = [httpx2.AsyncClient(timeout=60) for _ in range(concurrency * len(urls))]
    stack = AsyncExitStack()
    try:
        peers: dict[str, list[Any]] = {}
        index = 0
        for name, url in urls.items():
            peers[name] = []
            for _ in range(concurrency):
                http = clients[index]
                index += 1
                if kind in ("auto", "legacy"):
                    peer: Any = SdkPeer(url, http, kind)
                    await stack.enter_async_context(peer.client)  # nested in order, closed LIFO
                else:
                    peer = RawPeer(url, http, MODERN if kind == "raw-2026" else HANDSHAKE)
                    await peer.open()
                peers[name].append(peer)
        for name in urls:  # warm every path: connections, pools, listings, caches
            await phase(peers[name], 10 * concurrency, [])
        samples: dict[str, list[float]] = {name: [] for name in urls}
        wall: dict[str, float] = dict.fromkeys(urls, 0.0)
        cpu: dict[str, dict[str, float]] = {name: dict.fromkeys(pids, 0.0) for name in urls}
        order = list(urls)
        done = 0
        while done < calls:
            size = min(phase_size, calls - done)
            for name in order:
                before = {role: cpu_tree(group) for role, group in pids.items()}
                wall[name] += await phase(peers[name], size, samples[name])
                for role, group in pids.items():
                    cpu[name][role] += cpu_tree(group) - before[role]
            order = order[1:] + order[:1]
            done += size
    finally:
        await stack.aclose()
        for client in clients:
            await client.aclose()
    return {
        name: {
            "p50": statistics.median(samples[name]),
            "p99": pct(samples[name], 0.99),
            "rate": len(samples[name]) / wall[name],
            **{f"cpu_{role}": spent / len(samples[name]) for role, spent in cpu[name].items()},
        }
        for name in urls
    }


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


def children(pid: int) -> list[int]:
    """`pid` and its direct children (nginx's worker)."""
    found = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def start(procs: list[subprocess.Popen[bytes]], cmd: list[str], port: int, what: str, **kwargs: Any) -> int:
    procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs))
    wait_port(port, procs[-1], what)
    return procs[-1].pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1600, help="measured calls per path and client kind")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--phase", type=int, default=160, help="calls per path before switching paths")
    parser.add_argument("--runs", type=int, default=1, help="repeat the whole measurement (same processes)")
    parser.add_argument("--upstream", choices=("fast", "everything"), default="fast")
    parser.add_argument("--clients", default="auto,legacy,raw", help=f"comma-separated, from {', '.join(CLIENTS)}")
    parser.add_argument("--fastmcp", action="store_true", help="add FastMCP's create_proxy as a path")
    parser.add_argument("--no-nginx", action="store_true", help="leave the nginx hop out")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.clients.split(",") if k.strip()]
    if unknown := set(kinds) - set(CLIENTS):
        raise SystemExit(f"unknown client kind(s): {', '.join(sorted(unknown))}; choose from {', '.join(CLIENTS)}")
    if args.upstream == "everything" and not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing; run `bash scripts/test` once to install the peers")
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None and not args.no_nginx:
        raise SystemExit("nginx is not installed; run `bash scripts/test` once (or pass --no-nginx)")

    procs: list[subprocess.Popen[bytes]] = []
    runs: list[dict[str, dict[str, dict[str, float]]]] = []
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

            project = tmp / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            (project / "agent" / "mcp-connections" / "upstream.py").write_text(
                "from connections import define_connection\n\n"
                f"connection = define_connection(url={upstream!r}, advertise_tools=True)\n"
            )
            gw_port = free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
            serve = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", "serve"]
            serve += ["--dir", str(project), "--port", str(gw_port), "--state-root", str(tmp / "state")]
            pids["agent-sdk"] = [start(procs, serve, gw_port, "agent-sdk serve", env={**env, "PYTHONPATH": str(ROOT)})]
            urls = {"direct": upstream, "agent-sdk /v1/mcp/tools": f"http://127.0.0.1:{gw_port}/v1/mcp/tools"}

            if not args.no_nginx:
                assert nginx is not None
                ng_port = free_port()
                conf = nginx_conf(tmp, ng_port, up_port)
                master = start(procs, [nginx, "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"], ng_port, "nginx")
                pids["nginx"] = children(master)
                urls["nginx hop"] = f"http://127.0.0.1:{ng_port}/mcp"

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
                urls["fastmcp create_proxy"] = f"http://127.0.0.1:{fm_port}/mcp"

            pids["clients"] = [os.getpid()]
            for run in range(args.runs):
                results: dict[str, dict[str, dict[str, float]]] = {}
                for kind in kinds:
                    results[kind] = anyio.run(measure, urls, args.calls, args.concurrency, args.phase, kind, pids)
                    report(run, kind, results[kind], args)
                runs.append(results)
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    summary(runs, kinds)


def report(run: int, kind: str, results: dict[str, dict[str, float]], args: argparse.Namespace) -> None:
    direct = results["direct"]
    print(
        f"\n### run {run + 1}, {kind} clients: tools/call echo, {args.upstream} upstream, {args.calls} calls per path, "
        f"{args.concurrency} concurrent, phases of {args.phase}\n"
    )
    print("| path | p50 ms | p99 ms | calls/s | p50 vs direct | calls/s vs direct |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['p50'] * 1000:.2f} | {r['p99'] * 1000:.2f} | {r['rate']:.0f} | "
            f"{r['p50'] / direct['p50']:.3f}x | {r['rate'] / direct['rate']:.3f}x |"
        )
    # CPU per call of every process while each path ran (read from /proc around every phase): the
    # steadier figure on a shared machine, and what bounds calls/s once the 2 cores are busy.
    roles = [key.removeprefix("cpu_") for key in direct if key.startswith("cpu_")]
    print("\nCPU per call (ms), by process, while each path ran:\n")
    print("| path | " + " | ".join(roles) + " | all |")
    print("|---|" + "---:|" * (len(roles) + 1))
    for name, r in results.items():
        spent = [r[f"cpu_{role}"] * 1000 for role in roles]
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in spent) + f" | {sum(spent):.3f} |")
    sys.stdout.flush()


def summary(runs: list[dict[str, dict[str, dict[str, float]]]], kinds: list[str]) -> None:
    """One line per client kind and path: the ratios to direct in every run."""
    print("\n### ratios to direct, every run (p50 / calls/s)\n")
    print("| clients | path | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|---|" + "---|" * len(runs))
    for kind in kinds:
        for name in runs[0][kind]:
            if name == "direct":
                continue
            cells = []
            for results in runs:
                r, d = results[kind][name], results[kind]["direct"]
                cells.append(f"{r['p50'] / d['p50']:.2f}x / {r['rate'] / d['rate']:.2f}x")
            print(f"| {kind} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
