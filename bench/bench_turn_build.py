"""Turn-build time with 1, 10 and 50 advertised connections, as a ratio to one upstream's list latency.

Every connection points at our recording upstream, which answers `tools/list` after L ms (one
process; `X-Tool-Prefix` keeps the tool names of the connections apart). A serial build would take
about N x L; the builder lists all connections in parallel, so the target is <= 1.3 x L at N=50.

    .venv/bin/python bench/bench_turn_build.py [--latency-ms 200] [--builds 7]

Two paths are measured, the listing cache off (every build really lists): auth-less connections
through the shared pool, and connections with a per-session `auth` callback, each listed through
the identity pool's client for that session's headers (opened by the warm-up build, reused after).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import Broker, SessionInfo, load_project  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.processes import recording_server, running  # noqa: E402


def write_project(
    root: Path, url: str, count: int, with_auth: bool, protocol: str = "auto", async_auth: bool = False
) -> None:
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    for i in range(count):
        auth = "auth=tenant, " if with_auth else ""
        (folder / f"c{i}.py").write_text(
            textwrap.dedent(f"""
                from connections import define_connection

                {"async " if async_auth else ""}def tenant(session):
                    return {{'headers': {{'X-Tenant': str(session.auth)}}}}

                connection = define_connection(
                    url={url!r}, headers={{"X-Tool-Prefix": "c{i}"}}, {auth}advertise_tools=True, protocol={protocol!r}
                )
            """)
        )


async def measure(root: Path, builds: int, expected_tools: int) -> list[float]:
    times: list[float] = []
    async with Broker(load_project(root), listing_ttl=0) as broker:
        session = SessionInfo(id="bench", auth="tenant-1")
        await broker.builder.build(session)  # warm: pooled clients open once, as in a running gateway
        for _ in range(builds):
            start = time.perf_counter()
            toolset = await broker.builder.build(session)
            times.append(time.perf_counter() - start)
            assert len(toolset) == expected_tools, (len(toolset), expected_tools)
    return times


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--builds", type=int, default=7)
    parser.add_argument(
        "--upstream",
        choices=("lean", "sdk"),
        default="lean",
        help="lean: bench/slow_lister.py (a raw ASGI upstream, cheap per request); sdk: the mcp SDK's server",
    )
    parser.add_argument(
        "--async-auth", action="store_true", help="an `async def` auth callback (default: a sync one, run on a thread)"
    )
    args = parser.parse_args()
    latency = args.latency_ms / 1000
    port = free_port()
    if args.upstream == "lean":
        cmd = [sys.executable, str(Path(__file__).with_name("slow_lister.py")), str(port), str(args.latency_ms)]
        protocol = "legacy"
    else:
        cmd = recording_server(port, tools="a,b", list_delay_ms=args.latency_ms)
        protocol = "auto"
    with running(cmd, port=port):
        url = f"http://127.0.0.1:{port}/mcp"
        print(
            f"upstream ({args.upstream}) tools/list latency L = {args.latency_ms:.0f} ms; "
            f"{args.builds} builds each (after one warm-up)"
        )
        print(f"{'path':<28} {'N':>3} {'median ms':>10} {'max ms':>8} {'median / L':>11}")
        for with_auth in (False, True):
            for count in (1, 10, 50):
                with tempfile.TemporaryDirectory() as tmp:
                    write_project(Path(tmp), url, count, with_auth, protocol, args.async_auth)
                    times = await measure(Path(tmp), args.builds, expected_tools=2 * count)
                med = statistics.median(times)
                path = "per-session auth (pooled)" if with_auth else "pooled (auth-less)"
                print(f"{path:<28} {count:>3} {med * 1000:>10.1f} {max(times) * 1000:>8.1f} {med / latency:>11.2f}")


if __name__ == "__main__":
    # The gateway serves on uvloop when it is installed (uvicorn picks it); AGENT_SDK_BENCH_LOOP=asyncio compares.
    import os

    anyio.run(main, backend_options={"use_uvloop": os.environ.get("AGENT_SDK_BENCH_LOOP", "uvloop") == "uvloop"})
