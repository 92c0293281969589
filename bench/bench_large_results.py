"""A large tool result through the gateway: peak RSS above idle as a multiple of the payload, RSS after the
call, and time per MB, on stdio and both HTTP generations.

    .venv/bin/python bench/bench_large_results.py                # 5 MB, 5 calls per path
    .venv/bin/python bench/bench_large_results.py --mb 20 --calls 3

One `agent-sdk serve` per path (a subprocess, default settings), its one advertised connection our
counting server (`tests/fixtures/upstreams/counting_server.py`, tool `big(size)`): over stdio, over
Streamable HTTP on 2026-07-28 (`protocol="modern"`, the SDK transport) and on the handshake
(`protocol="legacy"`, the fast wire); HTTP upstreams answer with JSON bodies. The peer posts
`tools/call` on `/v1/mcp/tools` (plain JSON-RPC, 2025-11-25). The payload is the answer's size on the
wire (the server sends the text twice: as content and as structured content). The gateway's peak
is its `VmHWM`, reset before each call through `/proc/PID/clear_refs`; idle is its `VmRSS` after a
small call; "after" is `VmRSS` once the call returned. Time per MB: (median large call - median
small call) / payload MB.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import HANDSHAKE, RawPeer, decode_answer, free_port, start_listening, start_serve  # noqa: E402

COUNTING = str(ROOT / "tests" / "fixtures" / "upstreams" / "counting_server.py")
MB = 1024 * 1024


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def definition(path: str, upstream: str | None) -> str:
    if path == "stdio":
        return f"define_connection(command=sys.executable, args=[{COUNTING!r}, 'stdio'], advertise_tools=True)"
    protocol = "modern" if path == "http 2026-07-28" else "legacy"
    return f"define_connection(url={upstream!r}, protocol={protocol!r}, advertise_tools=True)"


async def measure(url: str, pid: int, size: int, calls: int) -> dict[str, float]:
    async with httpx2.AsyncClient(timeout=120) as http:
        peer = RawPeer(url, http, HANDSHAKE)
        await peer.open()

        async def call(n: int) -> tuple[float, int]:
            body = peer._request("tools/call", {"name": "big", "arguments": {"size": n}})  # pyright: ignore[reportPrivateUsage]
            start = time.perf_counter()
            response = await http.post(url, json=body, headers=peer.headers)
            elapsed = time.perf_counter() - start
            message = decode_answer(response)
            assert "result" in message and not message["result"].get("isError"), str(message)[:300]
            return elapsed, len(response.content)

        small = [(await call(10))[0] for _ in range(calls)]
        await anyio.sleep(0.5)
        idle = status_kb(pid, "VmRSS")
        peaks: list[int] = []
        afters: list[int] = []
        large: list[float] = []
        payload = 0
        for _ in range(calls):
            Path(f"/proc/{pid}/clear_refs").write_text("5")  # noqa: ASYNC240 - resets VmHWM to the current RSS
            seconds, payload = await call(size)
            large.append(seconds)
            peaks.append(status_kb(pid, "VmHWM"))
            await anyio.sleep(0.5)
            afters.append(status_kb(pid, "VmRSS"))
        mb = payload / MB
        return {
            "payload_mb": mb,
            "idle_mb": idle / 1024,
            "peak_x": (max(peaks) - idle) / 1024 / mb,
            "after_mb": (max(afters) - idle) / 1024,
            "ms_per_mb": (statistics.median(large) - statistics.median(small)) * 1000 / mb,
        }


def run_path(path: str, size: int, calls: int) -> dict[str, float]:
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            upstream = None
            if path != "stdio":
                up_port = free_port()
                command = [sys.executable, COUNTING, "http", str(up_port)]
                procs.append(start_listening(command, up_port, "counting server", {"JSON_RESPONSE": "1"}))
                upstream = f"http://127.0.0.1:{up_port}/mcp"
            project = Path(tmp) / "project"
            (project / "agent" / "mcp-connections").mkdir(parents=True)
            (project / "agent" / "mcp-connections" / "big.py").write_text(
                f"import sys\nfrom connections import define_connection\n\nconnection = {definition(path, upstream)}\n"
            )
            gateway, port = start_serve(project, Path(tmp) / "state")
            procs.append(gateway)
            return anyio.run(measure, f"http://127.0.0.1:{port}/v1/mcp/tools", gateway.pid, size, calls)
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=5.0, help="size of the tool's text (sent twice)")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--path", action="append", choices=["stdio", "http 2026-07-28", "http handshake"])
    args = parser.parse_args()
    size = int(args.mb * MB)
    print("| path | payload, MB | idle RSS, MB | peak above idle / payload | RSS after - idle, MB | ms per MB |")
    print("|---|---|---|---|---|---|")
    for path in args.path or ["stdio", "http 2026-07-28", "http handshake"]:
        r = run_path(path, size, args.calls)
        print(
            f"| {path} | {r['payload_mb']:.1f} | {r['idle_mb']:.0f} | {r['peak_x']:.2f}x | {r['after_mb']:.1f} "
            f"| {r['ms_per_mb']:.1f} |"
        )


if __name__ == "__main__":
    main()
