"""Time to the first `tools/list` on `/v1/mcp/tools` with N advertised stdio connections (a small Python
MCP server each, `bench/stdio_tool_server.py`), against one child's own start cost.

    .venv/bin/python bench/bench_many_stdio.py                 # N = 25, 50, 100, default settings
    .venv/bin/python bench/bench_many_stdio.py --n 100 --start-limit 4

The gateway is `agent-sdk serve` (a subprocess, default settings unless `--start-limit`); the peer posts
`initialize` and then `tools/list` (plain JSON-RPC, 2025-11-25), retrying on a failed listing up to
`--tries` times. Every child appends a line to a count file when it starts, so "started twice" is
counted at the children. The children's own start cost is measured first: one child started and
listed through a `ClientPool`, five times, serially; the figure to compare is N x that / cores.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import HANDSHAKE, RawPeer, decode_answer, start_serve  # noqa: E402

from connections import ClientPool, define_connection  # noqa: E402
from connections.pool._pool import default_start_limit  # noqa: E402

SERVER = str(Path(__file__).with_name("stdio_tool_server.py"))


def write_project(root: Path, n: int, count_file: Path) -> None:
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"s{i}.py").write_text(
            "import sys\nfrom connections import define_connection\n\n"
            f"connection = define_connection(command=sys.executable, args=[{SERVER!r}, 'tool_{i}'],\n"
            f"    env={{'COUNT_FILE': {str(count_file)!r}}}, advertise_tools=True)\n"
        )


async def own_start_cost(runs: int = 5) -> float:
    times: list[float] = []
    for _ in range(runs):
        defn = define_connection(command=sys.executable, args=[SERVER, "t"]).named("t", None)
        async with ClientPool({"t": defn}) as pool:
            start = time.perf_counter()
            await pool.list_tools("t")
            times.append(time.perf_counter() - start)
    return statistics.median(times)


async def first_listing(url: str, tries: int) -> tuple[float, int, int]:
    """Seconds to the first successful listing, the try it came on, and the tools it listed."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(600.0)) as http:
        peer = RawPeer(url, http, HANDSHAKE)
        start = time.perf_counter()
        await peer.open()
        for attempt in range(1, tries + 1):
            response = await http.post(url, json=peer._request("tools/list", {}), headers=peer.headers)  # pyright: ignore[reportPrivateUsage]
            message = decode_answer(response)
            if "result" in message:
                return time.perf_counter() - start, attempt, len(message["result"]["tools"])
            print(f"   try {attempt} failed after {time.perf_counter() - start:.1f}s: {str(message)[:160]}")
        raise SystemExit(f"no listing in {tries} tries")


def run_one(n: int, start_limit: int | None, tries: int) -> tuple[float, int, int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        count_file = Path(tmp) / "starts.txt"
        project = Path(tmp) / "project"
        write_project(project, n, count_file)
        flags = ["--start-limit", str(start_limit)] if start_limit is not None else []
        proc, port = start_serve(project, Path(tmp) / "state", *flags)
        try:
            seconds, attempt, tools = anyio.run(first_listing, f"http://127.0.0.1:{port}/v1/mcp/tools", tries)
        finally:
            proc.terminate()
            proc.wait(30)
        starts = len(count_file.read_text().splitlines()) if count_file.exists() else 0
        return seconds, attempt, tools, starts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, action="append", help="connections (repeatable); default 25, 50, 100")
    parser.add_argument("--start-limit", type=int, default=None)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    cores = default_start_limit()
    own = anyio.run(own_start_cost)
    limit = args.start_limit or cores
    print(f"one child's own start + list: {own:.2f}s (median of 5); cores {cores}; start limit {limit}")
    print("| N | first listing, s | on try | tools | children started | per child, s | N x own / limit, s |")
    print("|---|---|---|---|---|---|---|")
    for n in args.n or [25, 50, 100]:
        seconds, attempt, tools, starts = run_one(n, args.start_limit, args.tries)
        print(f"| {n} | {seconds:.1f} | {attempt} | {tools} | {starts} | {seconds / n:.3f} | {n * own / limit:.1f} |")


if __name__ == "__main__":
    main()
