"""A pooled `tools/call` over the fast leg against the same call over the SDK's Streamable HTTP transport.

    .venv/bin/python bench/bench_fast_calls.py                 # 2000 calls per round, 4 rounds
    .venv/bin/python bench/bench_fast_calls.py --calls 5000

Upstream: `@modelcontextprotocol/server-everything streamableHttp` (installed into .peers/ by
`bash scripts/test`), its `echo` tool. Two `ClientPool`s in this process, one with the fast leg
(the default) and one with `fast_calls=False`, take turns (fast, sdk, fast, sdk, ...); 16
concurrent callers each. Reports this process's CPU time per call (the client side only: the
upstream runs in its own process) and calls/s, on uvloop as `serve` runs. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_host_mcp import EVERYTHING, start_http  # noqa: E402
from connections import ClientPool, define_connection  # noqa: E402


async def measure(url: str, fast: bool, calls: int, concurrency: int) -> tuple[float, float]:
    """(CPU seconds per call, calls per second) for `calls` calls from `concurrency` callers."""
    defn = define_connection(url=url).named("everything", None)
    async with ClientPool({"everything": defn}, fast_calls=fast) as pool:
        for _ in range(50):  # open the session, warm the connections
            await pool.call_tool("everything", "echo", {"message": "warm"})
        if pool.status("everything").fast_calls is not fast:
            raise SystemExit(f"the fast leg is {'off' if fast else 'on'} where it should not be")
        remaining = calls

        async def caller() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                result = await pool.call_tool("everything", "echo", {"message": "benchmark"})
                if result.get("isError"):
                    raise SystemExit(f"error result: {result}")

        cpu, wall = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(caller)
        return (time.process_time() - cpu) / calls, calls / (time.perf_counter() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per leg, alternating (default 4)")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    if not EVERYTHING.exists():
        raise SystemExit(f"{EVERYTHING} is missing; run `bash scripts/test` once to install the peers")
    upstream, url = start_http()
    try:
        results: dict[str, list[tuple[float, float]]] = {"fast leg": [], "SDK transport": []}
        for _ in range(args.rounds):
            for name, fast in (("fast leg", True), ("SDK transport", False)):
                results[name].append(
                    anyio.run(measure, url, fast, args.calls, args.concurrency, backend_options={"use_uvloop": True})
                )
    finally:
        upstream.terminate()
        upstream.wait(timeout=10)
    print(f"pooled tools/call echo, {args.rounds} rounds of {args.calls} calls per leg, {args.concurrency} callers\n")
    print("| wire | CPU per call (median) | calls/s (median) |")
    print("|---|---:|---:|")
    for name, rows in results.items():
        cpu = statistics.median(r[0] for r in rows)
        rate = statistics.median(r[1] for r in rows)
        print(f"| {name} | {cpu * 1e6:.0f} µs | {rate:.0f} |")


if __name__ == "__main__":
    main()
