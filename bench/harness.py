"""What the benchmarks share: free ports, starting processes and `agent-sdk serve`, the two kinds of
MCP peer (plain JSON-RPC posts and the `mcp` 2.x `Client`), call phases and CPU time from `/proc`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))
EVERYTHING = PEERS / "node_modules" / ".bin" / "mcp-server-everything"
FAST_UPSTREAM = ROOT / "bench" / "fast_upstream.py"
HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
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


def decode_answer(response: httpx2.Response) -> dict[str, Any]:
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
    token: str | None = None

    async def open(self) -> None:
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.token:
            self.headers["authorization"] = f"Bearer {self.token}"
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
        message = decode_answer(response)
        elapsed = time.perf_counter() - start
        if "error" in message or message["result"].get("isError"):
            raise RuntimeError(f"{self.url}: {message}")
        return elapsed


class SdkPeer:
    """The same through the `mcp` 2.x `Client` (`mode`: "auto" or "legacy"), one session per client and path."""

    def __init__(self, url: str, http: httpx2.AsyncClient, mode: str) -> None:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        self.client = Client(streamable_http_client(url, http_client=http), mode=mode, cache=None)

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


def cpu_ns(pid: int) -> int:
    """CPU time of every live thread of process `pid` so far, in nanoseconds (the scheduler's own account,
    `/proc/<pid>/task/*/schedstat`): for phases short enough that `cpu_seconds`' clock ticks (10 ms) would
    be most of what is measured. A thread that ends between two readings takes its time with it."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # the thread ended as it was read
            continue
    return total


def cpu_tree(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def children(pid: int) -> list[int]:
    """The direct children of `pid` (nginx's worker, the process py-spy started)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """Stop `procs`, the last started first (a gateway before the upstream that waits for its pooled
    connections); killed after 10 s."""
    for proc in reversed(procs):
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
