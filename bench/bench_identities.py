"""Per-session `auth` connections pooled per identity: a warm call's cost, and what 100 identities open upstream.

    .venv/bin/python bench/bench_identities.py [--calls 2000] [--identities 100] [--per-identity 10]

1. Warm call, p50 and p90: one turn tool (`Toolset.tools["echo"].call`, what a turn and `/v1/mcp/tools`
   call) on a connection with a per-session `auth` callback (one identity, its pooled client), against
   the same tool on an auth-less pooled connection, both on the fast `mcp` 2.x upstream of
   `bench/fast_upstream.py`, at each protocol generation (`protocol="legacy"`: the handshake,
   `protocol="modern"`: 2026-07-28). Calls alternate (auth, auth-less, auth-less, auth, ...) so drift
   on a busy machine hits both alike; the ratio is the figure (target <= 1.15).
2. 100 identities x 10 calls (8 in flight), counted at the upstream (`tests/fixtures/identity_upstream.py`):
   `initialize`s (upstream sessions), `server/discover`s and TCP connections, on a handshake-era
   upstream with sessions and on a stateless one at 2026-07-28 (targets: at most 100 sessions; one
   keep-alive pool).

Prints Markdown tables; docs/performance.md holds the figures of a reference run.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import Broker, SessionInfo, load_project  # noqa: E402
from connections.client._identity import SessionHeaders  # noqa: E402  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port  # noqa: E402
from tests.processes import identity_upstream, running  # noqa: E402

ARGS = {"message": "benchmark"}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def write_project(root: Path, url: str, protocol: str) -> None:
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    for name, auth in (("plain", ""), ("tenant", "auth=tenant, ")):
        (folder / f"{name}.py").write_text(
            textwrap.dedent(f"""
                from connections import define_connection

                async def tenant(session):
                    return {{"headers": {{"X-Tenant": str(session.auth)}}}}

                connection = define_connection(url={url!r}, {auth}protocol={protocol!r})
            """)
        )


async def warm_call(url: str, protocol: str, calls: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_project(root, url, protocol)
        async with Broker(load_project(root)) as broker:
            # The builder's `call_tool` is what every turn tool's call reaches (`Broker._call_tool`): the
            # pool for an auth-less connection, the identity pool with the session's headers otherwise.
            plain, tenant = broker.project.connections["plain"], broker.project.connections["tenant"]
            identity = SessionHeaders({"X-Tenant": "tenant-1"}, "bench")

            async def auth_call() -> Any:
                return await broker.builder.call_tool(tenant, "echo", ARGS, identity)

            async def plain_call() -> Any:
                return await broker.builder.call_tool(plain, "echo", ARGS, None)

            for _ in range(200):  # warm both sides
                await auth_call()
                await plain_call()
            auth_times: list[float] = []
            plain_times: list[float] = []
            for i in range(calls):
                order = (auth_call, plain_call) if i % 2 == 0 else (plain_call, auth_call)
                for call in order:
                    start = time.perf_counter()
                    await call()
                    (auth_times if call is auth_call else plain_times).append(time.perf_counter() - start)
    return auth_times, plain_times


async def hundred(stateful: bool, identities: int, per_identity: int) -> dict[str, Any]:
    port = free_port()
    with running(identity_upstream(port, stateful=stateful), port=port):
        base = f"http://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            folder = root / "agent" / "mcp-connections"
            folder.mkdir(parents=True)
            (folder / "tenant.py").write_text(
                textwrap.dedent(f"""
                    from connections import define_connection

                    async def tenant(session):
                        return {{"headers": {{"X-Tenant": str(session.auth)}}}}

                    connection = define_connection(
                        url={base + "/mcp"!r}, auth=tenant, advertise_tools=True,
                        protocol={"legacy" if stateful else "auto"!r},
                    )
                """)
            )
            start = time.perf_counter()
            async with Broker(load_project(root)) as broker:
                sessions = [SessionInfo(id=f"s{i}", auth=f"tenant-{i}") for i in range(identities)]
                toolsets = {s.id: await broker.builder.build(s) for s in sessions}
                plan = [s for s in sessions for _ in range(per_identity)]
                random.Random(5).shuffle(plan)
                limiter = anyio.Semaphore(8)

                async def one(n: int, s: SessionInfo) -> None:
                    async with limiter:
                        await toolsets[s.id].tools["record"].call({"value": f"{s.auth}|{n}"})

                async with anyio.create_task_group() as tg:
                    for n, s in enumerate(plan):
                        tg.start_soon(one, n, s)
                elapsed = time.perf_counter() - start
        async with httpx2.AsyncClient() as client:
            stats = (await client.get(f"{base}/stats")).json()
    wrong = [c for c in stats["calls"] if c["value"].split("|")[0] != c["tenant"]]
    return {
        "calls": len(stats["calls"]),
        "cross": len(wrong),
        "sessions": stats["sessions"],
        "discovers": stats["discovers"],
        "connections": stats["connections"],
        "seconds": elapsed,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--identities", type=int, default=100)
    parser.add_argument("--per-identity", type=int, default=10)
    args = parser.parse_args()
    port = free_port()
    upstream = [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), str(port)]
    with running(upstream, port=port):
        url = f"http://127.0.0.1:{port}/mcp"
        print(f"warm call, {args.calls} calls each side, alternating (ms)\n")
        print("| generation | auth p50 | auth-less p50 | p50 ratio | auth p90 | auth-less p90 | p90 ratio |")
        print("|---|---|---|---|---|---|---|")
        for protocol in ("legacy", "modern"):
            auth, plain = await warm_call(url, protocol, args.calls)
            a50, p50 = statistics.median(auth), statistics.median(plain)
            a90, p90 = pct(auth, 0.9), pct(plain, 0.9)
            label = "handshake (2025-11-25)" if protocol == "legacy" else "2026-07-28"
            print(
                f"| {label} | {a50 * 1000:.3f} | {p50 * 1000:.3f} | {a50 / p50:.2f} "
                f"| {a90 * 1000:.3f} | {p90 * 1000:.3f} | {a90 / p90:.2f} |"
            )
    print(f"\n{args.identities} identities x {args.per_identity} calls, 8 in flight, counted at the upstream\n")
    print("| upstream | calls | cross-identity | sessions (initialize) | server/discover | TCP connections | s |")
    print("|---|---|---|---|---|---|---|")
    for stateful in (True, False):
        out = await hundred(stateful, args.identities, args.per_identity)
        label = "handshake-era, sessions" if stateful else "2026-07-28, stateless"
        print(
            f"| {label} | {out['calls']} | {out['cross']} | {out['sessions']} | {out['discovers']} "
            f"| {out['connections']} | {out['seconds']:.1f} |"
        )


if __name__ == "__main__":
    anyio.run(main, backend_options={"use_uvloop": os.environ.get("AGENT_SDK_BENCH_LOOP", "uvloop") == "uvloop"})
