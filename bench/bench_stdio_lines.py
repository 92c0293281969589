"""How long the stdio transport takes to read one long answer line, by its size.

A real child (`python -c ...`) writes one JSON-RPC response whose result holds N MB of text, on one
line, through `connections.client._transports._stdio.stdio_transport`; we time from the child's start to the parsed
message. Linear reading means the time per MB stays flat as N grows (the ratio column near 1).

    .venv/bin/python bench/bench_stdio_lines.py            # 5, 10, 20 MB, best of 3
    .venv/bin/python bench/bench_stdio_lines.py --sizes 1 20 40 --runs 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import anyio

from connections.client._transports._stdio import stdio_transport  # pyright: ignore[reportPrivateUsage]

_CHILD = (
    "import sys\n"
    "n = int(sys.argv[1])\n"
    'head = \'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\'\n'
    "body = head + 'x' * n + '\"}]}}\\n'\n"
    "sys.stdout.write(body); sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)


async def _once(size: int) -> float:
    started = time.perf_counter()
    transport = stdio_transport(
        sys.executable, ["-c", _CHILD, str(size)], env=dict(os.environ), cwd=None, errlog=None, on_spawn=lambda _c: None
    )
    async with transport as (read, _write):
        message = await read.receive()
        elapsed = time.perf_counter() - started
    assert not isinstance(message, Exception), message
    return elapsed


async def main(sizes: list[int], runs: int) -> None:
    base: float | None = None
    print(f"| size | best of {runs} | per MB | per-MB ratio to the smallest |")
    print("|---|---|---|---|")
    for mb in sizes:
        best = min([await _once(mb * 1_000_000) for _ in range(runs)])
        per_mb = best / mb
        base = base or per_mb
        print(f"| {mb} MB | {best * 1000:.0f} ms | {per_mb * 1000:.1f} ms | {per_mb / base:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main, args.sizes, args.runs)
