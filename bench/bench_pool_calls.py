"""The outbound share of a `tools/call`: CPU per pooled call of this checkout against another one, same run.

    .venv/bin/python bench/bench_pool_calls.py --base /tmp/base                 # both generations, 4 rounds
    .venv/bin/python bench/bench_pool_calls.py --base /tmp/base --calls 4000 --rounds 6

`--base` is another checkout of the repository (`git archive <commit> | tar -x -C /tmp/base`). The
upstream is the fast `mcp` 2.x echo server of `bench/fast_upstream.py`. Each round runs, for each
checkout in turn (A = base, B = this one) and each generation (2025-11-25 with `protocol="legacy"`,
2026-07-28 with `protocol="modern"`), a child process that opens one `ClientPool` on it, warms it,
and times `--calls` calls of `pool.call_tool` from 16 concurrent callers: that process's CPU per
call (`time.process_time`, the pool, its wire and the result check; the upstream runs apart). Rounds
alternate the checkouts so that drift on a busy machine hits both alike. Prints the median per
checkout and generation, and B/A.

    .venv/bin/python bench/bench_pool_calls.py --splice       # what writing the peer's answer costs, in process

`--splice` takes one echo result from the upstream at each generation (`ClientPool.call_tool_upstream`)
and times, in this process, the answer a forwarding server writes two ways: spliced from the
upstream's bytes (`UpstreamResult.answer`), and as the `/v1/mcp/tools` lane writes it today
(`serialize_server_result` for the peer's version, the 2026-07-28 stamp, `pydantic_core.to_json`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FAST_UPSTREAM = ROOT / "bench" / "fast_upstream.py"
GENERATIONS = {"2025-11-25": "legacy", "2026-07-28": "modern"}


def child(url: str, protocol: str, calls: int, concurrency: int) -> None:
    """Run in a child process whose `PYTHONPATH` is the checkout under test: print CPU ms per call."""
    import anyio
    import uvloop

    from connections import ClientPool, define_connection

    async def main() -> None:
        defn = define_connection(url=url, protocol=protocol).named("up", None)
        async with ClientPool({"up": defn}) as pool:
            for _ in range(200):
                await pool.call_tool("up", "echo", {"message": "warm"})
            remaining = calls

            async def caller() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1
                    result = await pool.call_tool("up", "echo", {"message": "benchmark"})
                    if result.get("isError"):
                        raise SystemExit(f"error result: {result}")

            cpu = time.process_time()
            async with anyio.create_task_group() as tg:
                for _ in range(concurrency):
                    tg.start_soon(caller)
            print(json.dumps({"cpu_ms": (time.process_time() - cpu) / calls * 1000}))

    anyio.run(main, backend_options={"loop_factory": uvloop.new_event_loop})


def measure(checkout: Path, url: str, protocol: str, calls: int, concurrency: int) -> float:
    # This file runs in the child too; `connections` comes from `PYTHONPATH`, the checkout under test.
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, protocol, str(calls), str(concurrency)],
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="the checkout to compare against (A)")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--splice", action="store_true", help="time the answer writing, spliced and re-encoded")
    args = parser.parse_args()
    if args.splice:
        with _upstream() as url:
            splice(url)
        return
    if args.child:
        url, protocol, calls, concurrency = args.child
        child(url, protocol, int(calls), int(concurrency))
        return
    if args.base is None:
        parser.error("--base is required")
    with _upstream() as url:
        seen: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for version, protocol in GENERATIONS.items():
                for name, checkout in (("A", args.base.resolve()), ("B", ROOT)):
                    cpu = measure(checkout, url, protocol, args.calls, args.concurrency)
                    seen.setdefault((name, version), []).append(cpu)
        load = os.getloadavg()[0]
        print(f"{args.rounds} rounds of {args.calls} calls, {args.concurrency} callers; load average {load:.1f}\n")
        print("| generation | A (base) ms/call | B (this) ms/call | B/A |")
        print("|---|---:|---:|---:|")
        for version in GENERATIONS:
            a = statistics.median(seen[("A", version)])
            b = statistics.median(seen[("B", version)])
            print(f"| {version} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


@contextmanager
def _upstream() -> Generator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    upstream = subprocess.Popen(
        [sys.executable, str(FAST_UPSTREAM), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        upstream.terminate()
        upstream.wait()


def splice(url: str) -> None:
    import anyio
    import pydantic_core
    from mcp_types import SERVER_INFO_META_KEY, methods

    from connections import ClientPool, define_connection

    stamp = {"name": "agent-sdk", "version": "0"}

    async def result(protocol: str) -> Any:
        defn = define_connection(url=url, protocol=protocol).named("up", None)
        async with ClientPool({"up": defn}) as pool:
            return await pool.call_tool_upstream("up", "echo", {"message": "benchmark é"})

    def rewritten(passed: Any) -> bytes:
        wire = methods.serialize_server_result("tools/call", passed.version, passed.result)
        if passed.modern:
            meta = {k: v for k, v in (wire.get("_meta") or {}).items() if not k.startswith("io.modelcontextprotocol/")}
            wire["_meta"] = {**meta, SERVER_INFO_META_KEY: stamp}
        return pydantic_core.to_json({"jsonrpc": "2.0", "id": "peer-1", "result": wire})

    print("| generation | spliced µs | re-encoded µs |")
    print("|---|---:|---:|")
    for version, protocol in GENERATIONS.items():
        passed = anyio.run(result, protocol)
        n = 20000
        spliced = timeit.timeit(lambda p=passed: p.answer("peer-1", server_info=stamp), number=n) / n * 1e6
        encoded = timeit.timeit(lambda p=passed: rewritten(p), number=n) / n * 1e6
        print(f"| {version} | {spliced:.1f} | {encoded:.1f} |")


if __name__ == "__main__":
    main()
