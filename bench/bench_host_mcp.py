"""host.mcp vs the SDK client called directly: warm latency, cold open, 16 concurrent callers.

    .venv/bin/python bench/bench_host_mcp.py              # stdio and Streamable HTTP, 300 calls each
    .venv/bin/python bench/bench_host_mcp.py --calls 500 --concurrency 16

Upstreams: the MCP reference server `@modelcontextprotocol/server-everything` (installed into
.peers/ by `bash scripts/test`), its `echo` tool, over stdio (one child for host.mcp, one for
the direct client) and over Streamable HTTP (one server shared by both; it speaks the handshake
only), and `http-2026`: the fast `mcp` 2.x server of `bench/fast_upstream.py`, which both clients
reach at 2026-07-28. Warm calls are
interleaved (host, direct, direct, host, ...) so drift on a busy machine hits both sides alike.
Prints a Markdown table; docs/performance.md holds the figures of a reference run.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import ClientPool, ConnectionDefinition, HostMcp, define_connection  # noqa: E402

PEERS = Path(os.environ.get("AGENT_SDK_PEERS", ROOT / ".peers"))
EVERYTHING = PEERS / "node_modules" / ".bin" / "mcp-server-everything"
ARGS = {"message": "benchmark"}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


def direct_client(kind: str, url: str | None) -> Client:
    if kind == "stdio":
        return Client(StdioServerParameters(command=str(EVERYTHING), args=["stdio"]), cache=None)
    assert url is not None
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)), cache=None)


def definition(kind: str, url: str | None) -> ConnectionDefinition:
    if kind == "stdio":
        return define_connection(command=str(EVERYTHING), args=["stdio"]).named("bench", None)
    return define_connection(url=url).named("bench", None)


async def warm(kind: str, url: str | None, calls: int) -> dict[str, float]:
    async with ClientPool({"bench": definition(kind, url)}) as pool, direct_client(kind, url) as direct:
        host = HostMcp(pool)

        async def via_host() -> Any:
            return await host.call_tool("bench", "echo", ARGS)

        async def via_sdk() -> Any:
            return await direct.call_tool("echo", ARGS)

        for _ in range(30):  # warm both paths (JIT-free, but sockets, buffers and caches)
            await via_host()
            await via_sdk()
        host_s: list[float] = []
        sdk_s: list[float] = []
        for i in range(calls):
            order = (via_host, via_sdk) if i % 2 == 0 else (via_sdk, via_host)
            for fn in order:
                (host_s if fn is via_host else sdk_s).append(await timed(fn))
    return {
        "host_p50": pct(host_s, 0.50),
        "host_p99": pct(host_s, 0.99),
        "sdk_p50": pct(sdk_s, 0.50),
        "sdk_p99": pct(sdk_s, 0.99),
        "ratio_p50": pct(host_s, 0.50) / pct(sdk_s, 0.50),
        "ratio_p99": pct(host_s, 0.99) / pct(sdk_s, 0.99),
    }


async def cold(kind: str, url: str | None, rounds: int) -> dict[str, float]:
    host_s: list[float] = []
    sdk_s: list[float] = []
    for _ in range(rounds):
        start = time.perf_counter()
        async with ClientPool({"bench": definition(kind, url)}) as pool:
            await pool.call_tool("bench", "echo", ARGS)
            host_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        async with direct_client(kind, url) as direct:
            await direct.call_tool("echo", ARGS)
            sdk_s.append(time.perf_counter() - start)
    return {"host_cold": statistics.median(host_s), "sdk_cold": statistics.median(sdk_s)}


async def concurrent(kind: str, url: str | None, callers: int, per_caller: int, rounds: int = 6) -> dict[str, float]:
    """`callers` tasks on one connection, `per_caller` calls each; host and SDK batches alternate."""
    samples: dict[str, list[float]] = {"host": [], "sdk": []}
    wall: dict[str, float] = {"host": 0.0, "sdk": 0.0}
    async with ClientPool({"bench": definition(kind, url)}) as pool, direct_client(kind, url) as direct:
        host = HostMcp(pool)

        async def via_host() -> Any:
            return await host.call_tool("bench", "echo", ARGS)

        async def via_sdk() -> Any:
            return await direct.call_tool("echo", ARGS)

        sides = {"host": via_host, "sdk": via_sdk}
        for fn in sides.values():
            await fn()
        for i in range(rounds):
            for label in ("host", "sdk") if i % 2 == 0 else ("sdk", "host"):
                fn, bucket = sides[label], samples[label]

                async def caller(fn: Callable[[], Awaitable[Any]] = fn, bucket: list[float] = bucket) -> None:
                    for _ in range(per_caller):
                        bucket.append(await timed(fn))

                start = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(callers):
                        tg.start_soon(caller)
                wall[label] += time.perf_counter() - start
        sessions = pool.status("bench").opens
    out: dict[str, float] = {"host_sessions": float(sessions)}
    for label in ("host", "sdk"):
        out[f"{label}_conc_p50"] = pct(samples[label], 0.50)
        out[f"{label}_conc_p99"] = pct(samples[label], 0.99)
        out[f"{label}_conc_rps"] = len(samples[label]) / wall[label]
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


KINDS = ("stdio", "http", "http-2026")


def start_http(modern: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), str(port)] if modern else None
    proc = subprocess.Popen(
        cmd or [str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{cmd or 'server-everything (streamableHttp)'} did not start within 30 s")


async def run(args: argparse.Namespace, urls: dict[str, str | None]) -> None:
    only = set(args.only or ("warm", "cold", "concurrent"))
    if "warm" in only:
        await run_warm(args, urls)
    if "cold" in only:
        await run_cold(args, urls)
    if "concurrent" in only:
        await run_concurrent(args, urls)


async def run_warm(args: argparse.Namespace, urls: dict[str, str | None]) -> None:
    print(f"# host.mcp vs direct SDK client (`echo`; {args.calls} warm calls each, interleaved)\n")
    print("| upstream | host p50 ms | SDK p50 ms | p50 ratio | host p99 ms | SDK p99 ms | p99 ratio |")
    print("|---|---|---|---|---|---|---|")
    results: dict[str, dict[str, float]] = {}
    for kind in KINDS:
        r = await warm(kind, urls[kind], args.calls)
        results[kind] = r
        print(
            f"| {kind} | {ms(r['host_p50'])} | {ms(r['sdk_p50'])} | {r['ratio_p50']:.3f} | "
            f"{ms(r['host_p99'])} | {ms(r['sdk_p99'])} | {r['ratio_p99']:.3f} |"
        )
    worst = max(r["ratio_p50"] for r in results.values())
    print(f"\nworst p50 ratio: {worst:.3f} (target <= 1.15)")


async def run_cold(args: argparse.Namespace, urls: dict[str, str | None]) -> None:
    print(f"\n## Cold open: first call on a fresh client (median of {args.cold_rounds})\n")
    print("| upstream | host.mcp ms | SDK ms |")
    print("|---|---|---|")
    for kind in KINDS:
        r = await cold(kind, urls[kind], args.cold_rounds)
        print(f"| {kind} | {ms(r['host_cold'])} | {ms(r['sdk_cold'])} |")


async def run_concurrent(args: argparse.Namespace, urls: dict[str, str | None]) -> None:
    print(
        f"\n## {args.concurrency} concurrent callers on one connection ({args.per_caller} calls each, "
        "6 alternating batches per side)\n"
    )
    print("| upstream | host p50 ms | host p99 ms | host calls/s | SDK p50 ms | SDK p99 ms | SDK calls/s | sessions |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in KINDS:
        r = await concurrent(kind, urls[kind], args.concurrency, args.per_caller)
        print(
            f"| {kind} | {ms(r['host_conc_p50'])} | {ms(r['host_conc_p99'])} | {r['host_conc_rps']:.0f} | "
            f"{ms(r['sdk_conc_p50'])} | {ms(r['sdk_conc_p99'])} | {r['sdk_conc_rps']:.0f} | "
            f"{r['host_sessions']:.0f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300, help="warm calls per side and upstream (>= 200)")
    parser.add_argument("--cold-rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--per-caller", type=int, default=25)
    parser.add_argument(
        "--only", choices=("warm", "cold", "concurrent"), action="append", help="run only these sections (repeatable)"
    )
    args = parser.parse_args()
    if not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing; run `bash scripts/test` once to install the peers")
    proc, url = start_http()
    modern, modern_url = start_http(modern=True)
    try:
        anyio.run(run, args, {"stdio": None, "http": url, "http-2026": modern_url})
    finally:
        for each in (proc, modern):
            each.terminate()
            each.wait(timeout=10)


if __name__ == "__main__":
    main()
