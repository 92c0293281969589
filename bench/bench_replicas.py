"""Sessions through nginx over 1 and 3 `agent-sdk serve --state-url` replicas, and Redis round trips per
session operation.

    .venv/bin/python bench/bench_replicas.py [--seconds 20] [--clients 8] [--ops 40]

Part 1 (throughput, one run, the two layouts alternating so machine drift hits both): Redis, nginx
running `deploy/nginx.conf`, and 1 or 3 replicas of the basic test project. Each of `--clients`
clients repeats one *session operation*: `POST /v1/session` (which starts a turn), read the stream
from index 0 until the turn's `session.waiting`, then `GET /v1/session/{id}/events`. Prints ops/s,
p50 and p99 latency for each layout, and the 3-replica/1-replica ratios.

Part 2 (round trips): one replica talks to Redis through a counting TCP relay; each operation is
run `--ops` times in a row and the relay's count of client->Redis sends (one per command, one per
pipeline or script) is divided by `--ops`, minus the background (the lapsed-lease scan, one per
second) measured over an idle second. A turn's own writes (on the server, after the answer) are
counted as part of `create`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.abc import SocketStream

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import free_port  # noqa: E402
from tests.gateway.conftest import BASIC  # noqa: E402
from tests.gateway.replicas import BEARER, nginx_front, redis_server, replica  # noqa: E402

AUTH = {"Authorization": f"Bearer {BEARER}"}


async def session_op(http: httpx2.AsyncClient) -> str:
    """Create a session (its first turn starts), follow its stream to the turn's end, read its events."""
    made = (await http.post("/v1/session", json={"message": "hello"})).json()
    sid, turn = made["sessionId"], made["turnId"]
    async with http.stream("GET", f"/v1/session/{sid}/stream", params={"startIndex": 0}) as response:
        async for line in response.aiter_lines():
            if '"session.waiting"' in line and turn in line:
                break
    events = await http.get(f"/v1/session/{sid}/events")
    assert events.status_code == 200 and turn in events.text
    return sid


async def drive(base: str, clients: int, seconds: float) -> tuple[int, list[float]]:
    latencies: list[float] = []
    limits = httpx2.Limits(max_connections=clients * 2, max_keepalive_connections=clients * 2)
    async with httpx2.AsyncClient(base_url=base, headers=AUTH, timeout=60, limits=limits) as http:
        for _ in range(clients):
            await session_op(http)
        deadline = time.monotonic() + seconds

        async def loop() -> None:
            while time.monotonic() < deadline:
                started = time.perf_counter()
                await session_op(http)
                latencies.append(time.perf_counter() - started)

        async with anyio.create_task_group() as tg:
            for _ in range(clients):
                tg.start_soon(loop)
    return len(latencies), latencies


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


class Relay:
    """A TCP relay to Redis that counts what clients send (each send is one command, pipeline or script)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.sends = 0

    async def serve(self) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
        await listener.serve(self._handle)

    async def _handle(self, client: SocketStream) -> None:
        async with client, await anyio.connect_tcp("127.0.0.1", self.target) as upstream:

            async def pump(src: SocketStream, dst: SocketStream, count: bool) -> None:
                try:
                    async for chunk in src:
                        if count:
                            self.sends += 1
                        await dst.send(chunk)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
                tg.cancel_scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump, client, upstream, True)
                tg.start_soon(pump, upstream, client, False)


async def round_trips(base: str, relay: Relay, ops: int) -> dict[str, float]:
    """Sends to Redis per operation, background subtracted."""
    out: dict[str, float] = {}
    async with httpx2.AsyncClient(base_url=base, headers=AUTH, timeout=60) as http:
        await session_op(http)
        await anyio.sleep(1.5)
        before, started = relay.sends, time.monotonic()
        await anyio.sleep(2.0)
        background = (relay.sends - before) / (time.monotonic() - started)
        sessions: list[dict[str, Any]] = []

        async def create() -> None:
            made = (await http.post("/v1/session", json={"message": "hello"})).json()
            sessions.append(made)
            async with http.stream("GET", f"/v1/session/{made['sessionId']}/stream") as response:
                async for line in response.aiter_lines():
                    if '"session.waiting"' in line:
                        break

        async def follow_up() -> None:
            s = sessions.pop()
            made = await http.post(
                f"/v1/session/{s['sessionId']}", json={"message": "again", "continuationToken": s["continuationToken"]}
            )
            sessions.insert(0, made.json())
            async with http.stream("GET", f"/v1/session/{s['sessionId']}/stream", params={"startIndex": 0}) as response:
                async for line in response.aiter_lines():
                    if '"session.waiting"' in line and made.json()["turnId"] in line:
                        break

        async def get() -> None:
            await http.get(f"/v1/session/{sessions[0]['sessionId']}")

        async def events() -> None:
            await http.get(f"/v1/session/{sessions[0]['sessionId']}/events")

        async def listing() -> None:
            await http.get("/v1/sessions", params={"limit": 20})

        async def tools_call() -> None:
            await http.post("/v1/tools/lookup", json={"input": {"key": "k"}})

        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("create + its turn + stream read", create),
            ("follow-up + its turn + stream read", follow_up),
            ("GET /v1/session/{id}", get),
            ("GET /v1/session/{id}/events", events),
            ("GET /v1/sessions (one page of 20)", listing),
            ("direct tool call, no session", tools_call),
        ]
        for name, step in steps:
            before, started = relay.sends, time.monotonic()
            for _ in range(ops):
                await step()
            await anyio.sleep(0.3)  # let the last turn's writes land
            spent = time.monotonic() - started
            out[name] = max(0.0, (relay.sends - before - background * spent) / ops)
    return out


async def main(seconds: float, clients: int, ops: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp_name,
        redis_server(Path(tmp_name) / "redis") as redis,
    ):
        tmp = Path(tmp_name)
        replicas = [replica(BASIC, tmp / f"r{i}", redis.url, lease=10.0) for i in range(3)]
        try:
            with (
                nginx_front(tmp / "nginx1", [replicas[0].port]) as one,
                nginx_front(tmp / "nginx3", [r.port for r in replicas]) as three,
            ):
                results: dict[str, list[tuple[int, list[float]]]] = {"1 replica": [], "3 replicas": []}
                for _ in range(2):  # alternate: 1, 3, 1, 3
                    for label, base in (("1 replica", one), ("3 replicas", three)):
                        results[label].append(await drive(base, clients, seconds / 2))
            print(f"session create + one turn + event read through nginx, {clients} clients, {seconds:g} s per layout")
            rates: dict[str, float] = {}
            for label, runs in results.items():
                count = sum(n for n, _ in runs)
                samples = [x for _, lat in runs for x in lat]
                rates[label] = count / seconds
                p50, p99 = pct(samples, 0.5), pct(samples, 0.99)
                print(f"  {label:<10} {rates[label]:7.1f} ops/s  p50 {p50:6.1f} ms  p99 {p99:6.1f} ms")
            print(f"  3/1 throughput ratio {rates['3 replicas'] / rates['1 replica']:.2f}")
        finally:
            for r in replicas:
                r.stop()

        relay = Relay(redis.port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay.serve)
            counted = await anyio.to_thread.run_sync(
                lambda: replica(BASIC, tmp / "counted", f"redis://127.0.0.1:{relay.port}/0", lease=10.0)
            )
            try:
                per_op = await round_trips(counted.url, relay, ops)
            finally:
                counted.stop()
                tg.cancel_scope.cancel()
        print(f"Redis round trips per operation (one replica, {ops} in a row each, background subtracted):")
        for name, value in per_op.items():
            print(f"  {name:<44} {value:5.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds per layout (split in two phases)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=40)
    args = parser.parse_args()
    anyio.run(main, args.seconds, args.clients, args.ops)
