"""`tools/call` of an advertised passthrough tool through `/v1/mcp/tools`, against the same call made
directly to the upstream, and through FastMCP's proxy (`create_proxy`) over the same upstream.

    .venv/bin/python bench/bench_mcp_tools.py                       # 800 calls per path, 16 clients
    .venv/bin/python bench/bench_mcp_tools.py --calls 1600 --concurrency 16

Upstream: `@modelcontextprotocol/server-everything streamableHttp` (installed into .peers/ by
`bash scripts/test`), its `echo` tool. The gateway is `agent-sdk serve` (a subprocess, loopback-strict
auth, deterministic runner) on a project whose one connection advertises that upstream; the proxy
is `fastmcp.server.create_proxy(url)` served over HTTP. Each of the 16 clients keeps one HTTP
connection per path and speaks plain JSON-RPC over Streamable HTTP (handshake 2025-11-25, the
version the TypeScript SDK negotiates), so the client costs the same for every path. Phases of
`--phase` calls alternate between the paths (rotating the order each round), so drift on a busy
2-core machine hits every path alike. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
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
PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))
EVERYTHING = PEERS / "node_modules" / ".bin" / "mcp-server-everything"
VERSION = "2025-11-25"
CALL = {"name": "echo", "arguments": {"message": "benchmark"}}


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
class Peer:
    """One client's connection to one path: a Streamable HTTP JSON-RPC session."""

    url: str
    http: httpx2.AsyncClient
    headers: dict[str, str] = field(default_factory=dict)
    next_id: int = 0

    async def open(self) -> None:
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        }
        response = await self.http.post(self.url, json=self._request("initialize", init), headers=self.headers)
        response.raise_for_status()
        if "mcp-session-id" in response.headers:
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = VERSION
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post(self.url, json=note, headers=self.headers)

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def call(self) -> float:
        start = time.perf_counter()
        response = await self.http.post(self.url, json=self._request("tools/call", CALL), headers=self.headers)
        message = _decode(response)
        elapsed = time.perf_counter() - start
        if "error" in message or message["result"].get("isError"):
            raise RuntimeError(f"{self.url}: {message}")
        return elapsed


class SdkPeer:
    """The same, through the MCP Python SDK's `Client` (legacy handshake, one session per client)."""

    def __init__(self, url: str, http: httpx2.AsyncClient) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self.client = Client(streamable_http_client(url, http_client=http), mode="legacy", cache=None)

    async def open(self) -> None:
        raise NotImplementedError("entered through the AsyncExitStack in measure()")

    async def call(self) -> float:
        start = time.perf_counter()
        result = await self.client.call_tool(CALL["name"], CALL["arguments"])
        elapsed = time.perf_counter() - start
        if result.is_error:
            raise RuntimeError(f"error result: {result}")
        return elapsed


async def phase(peers: list[Any], calls: int, samples: list[float]) -> float:
    """`calls` calls spread over the peers (one in flight per peer); the phase's wall time."""
    remaining = calls

    async def worker(peer: Peer) -> None:
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


async def measure(
    urls: dict[str, str], calls: int, concurrency: int, phase_size: int, kind: str, pids: dict[str, int]
) -> dict[str, dict[str, float]]:
    """Latency and rate per path; with `pids` (role -> process), each role's CPU per call on each path."""
    clients = [httpx2.AsyncClient(timeout=60) for _ in range(concurrency * len(urls))]
    stack = AsyncExitStack()
    try:
        peers: dict[str, list[Any]] = {}
        index = 0
        for name, url in urls.items():
            peers[name] = []
            for _ in range(concurrency):
                peer: Any = Peer(url, clients[index]) if kind == "raw" else SdkPeer(url, clients[index])
                index += 1
                if isinstance(peer, SdkPeer):
                    await stack.enter_async_context(peer.client)  # nested in order, closed LIFO
                else:
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
                before = {role: cpu_seconds(pid) for role, pid in pids.items()}
                wall[name] += await phase(peers[name], size, samples[name])
                for role, pid in pids.items():
                    cpu[name][role] += cpu_seconds(pid) - before[role]
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
            "n": len(samples[name]),
            **{f"cpu_{role}": spent / len(samples[name]) for role, spent in cpu[name].items()},
        }
        for name in urls
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=800, help="measured calls per path (default 800)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--phase", type=int, default=160, help="calls per path before switching paths")
    parser.add_argument(
        "--client",
        choices=("raw", "sdk"),
        default="raw",
        help="raw: plain JSON-RPC posts (measures the servers); sdk: the MCP Python SDK Client (what a peer runs)",
    )
    parser.add_argument("--no-fastmcp", action="store_true", help="leave FastMCP's proxy out")
    args = parser.parse_args()
    if not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing; run `bash scripts/test` once to install the peers")

    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            up_port = free_port()
            procs.append(
                start_listening(
                    [str(EVERYTHING), "streamableHttp"], up_port, "mcp-server-everything", {"PORT": str(up_port)}
                )
            )
            upstream = f"http://127.0.0.1:{up_port}/mcp"

            project = Path(tmp) / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            (project / "agent" / "mcp-connections" / "everything.py").write_text(
                "from connections import define_connection\n\n"
                f"connection = define_connection(url={upstream!r}, advertise_tools=True)\n"
            )
            gateway, gw_port = start_serve(project, Path(tmp) / "state")
            procs.append(gateway)
            urls = {"direct": upstream, "agent-sdk /v1/mcp/tools": f"http://127.0.0.1:{gw_port}/v1/mcp/tools"}

            if not args.no_fastmcp:
                fm_port = free_port()
                script = (
                    "import sys\nfrom fastmcp.server import create_proxy\n"
                    "proxy = create_proxy(sys.argv[1])\n"
                    "proxy.run(transport='http', host='127.0.0.1', port=int(sys.argv[2]), path='/mcp', "
                    "show_banner=False, log_level='WARNING')\n"
                )
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", script, upstream, str(fm_port)],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                wait_port(fm_port, procs[-1], "fastmcp proxy")
                urls["fastmcp create_proxy"] = f"http://127.0.0.1:{fm_port}/mcp"

            pids = {"clients": os.getpid(), "upstream": procs[0].pid, "agent-sdk": procs[1].pid}
            if not args.no_fastmcp:
                pids["fastmcp"] = procs[2].pid
            results = anyio.run(measure, urls, args.calls, args.concurrency, args.phase, args.client, pids)
        finally:
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()

    direct = results["direct"]
    print(
        f"tools/call echo, {args.calls} calls per path, {args.concurrency} concurrent {args.client} clients, "
        f"phases of {args.phase}\n"
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


if __name__ == "__main__":
    main()
