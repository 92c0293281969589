"""Scale on one box: 10,000 handshake-era MCP sessions calling, 1,000 open GET streams, and the caps.

    .venv/bin/python bench/bench_scale.py [--sessions 10000] [--streams 1000] [--every 10] [--seconds 30]
                                          [--wires 32] [--replicas 1|3]

The gateway: `agent-sdk serve` with 40 bearer tokens (40 principals: each may hold 32 streams, so 1,000
streams need more than 31 of them), `--max-connections 2000`, one advertised upstream over HTTP
(`bench/fast_upstream.py`). With `--replicas 3`: three `serve --state-url` replicas on one Redis behind
nginx running `deploy/nginx.conf` (its main configuration with `worker_connections 4096`: Debian's
default of 768 cannot hold 1,000 streams plus their upstream connections).

The load (`bench/scale_client.py`, raw HTTP over asyncio sockets): every session `initialize`s once
(its sealed `Mcp-Session-Id`), then calls `echo` every `--every` seconds for `--seconds`, over
`--wires` keep-alive connections; the first `--streams` sessions each hold a GET stream open.

Printed: errors (must be 0), RSS per idle session and per stream, CPU per call (gateway and load
generator), call latency, calls per replica, Redis memory per session, the restart time into that
state (kill -9, start again, every stream reopened, every session's next call answered without a new
`initialize`), and what a peer gets at the caps: past `--max-connections` (503 + `Retry-After`), a
principal past its 32 streams (429 with a sentence).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_cluster import ROOT, await_healthy, start_replica
from scale_client import Stream, Wire, answer_ok, call_body, initialize_body

from tests.conftest import free_port
from tests.gateway.conftest import Served, make_project
from tests.gateway.replicas import RedisServer, nginx_conf
from tests.nginx import main_conf
from tests.peers import debian_bin
from tests.processes import running

TOKENS = [f"scale-peer-token-{i:02d}-0123456789abcdef" for i in range(40)]
MAX_CONNECTIONS = 2000
TICK = os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def headers_for(n: int, session: str = "") -> dict[str, str]:
    out = {
        "Authorization": f"Bearer {TOKENS[n % len(TOKENS)]}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    if session:
        out["Mcp-Session-Id"] = session
    return out


class Load:
    def __init__(self, host: str, port: int, sessions: int, wires: int) -> None:
        self.host, self.port = host, port
        self.ids: list[str] = [""] * sessions
        self.wires = [Wire(host, port) for _ in range(wires)]
        self.errors: dict[str, int] = {}
        self.latencies: list[float] = []
        self.calls = 0
        self.lag = 0.0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    async def _each(self, wire: Wire, todo: list[int], work: Any) -> None:
        for n in todo:
            await work(wire, n)

    async def spread(self, work: Any, sessions: range) -> None:
        """`work(wire, n)` for every session `n`, the sessions dealt over the wires."""
        w = len(self.wires)
        await asyncio.gather(*(self._each(wire, list(sessions)[i::w], work) for i, wire in enumerate(self.wires)))

    async def initialize(self, wire: Wire, n: int) -> None:
        try:
            status, headers, body = await wire.post("/v1/mcp/tools", headers_for(n), initialize_body(n))
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.error(f"initialize: {type(exc).__name__}")
            return
        if status != 200 or "mcp-session-id" not in headers:
            self.error(f"initialize: {status} {body[:80]!r}")
            return
        self.ids[n] = headers["mcp-session-id"]

    async def call(self, wire: Wire, n: int) -> bool:
        text = f"s{n}.{self.calls}"
        started = time.perf_counter()
        try:
            status, _, body = await wire.post("/v1/mcp/tools", headers_for(n, self.ids[n]), call_body(n, text))
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.error(f"call: {type(exc).__name__}")
            return False
        self.latencies.append(time.perf_counter() - started)
        self.calls += 1
        if not answer_ok(status, body, text):
            self.error(f"call: {status} {body[:120]!r}")
            return False
        return True

    async def steady(self, every: float, seconds: float) -> None:
        """Each session calls every `every` s (their phases spread evenly) for `seconds`."""
        t0 = time.monotonic()
        sessions = len(self.ids)
        w = len(self.wires)

        async def run(i: int, wire: Wire) -> None:
            mine = list(range(i, sessions, w))
            k = 0
            while True:
                n = mine[k % len(mine)]
                due = t0 + (k // len(mine)) * every + n * every / sessions
                if due - t0 > seconds:
                    return
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                else:
                    self.lag = max(self.lag, -wait)
                await self.call(wire, n)
                k += 1

        await asyncio.gather(*(run(i, wire) for i, wire in enumerate(self.wires)))


async def open_streams(host: str, port: int, ids: list[str], count: int) -> tuple[list[Stream], dict[str, int]]:
    streams = [Stream(host, port, headers_for(n, ids[n])) for n in range(count)]
    statuses: dict[str, int] = {}
    for chunk in range(0, count, 100):  # a hundred at a time: a burst of 1,000 connects is not the point here
        got = await asyncio.gather(*(s.open() for s in streams[chunk : chunk + 100]), return_exceptions=True)
        for status in got:
            key = str(status) if isinstance(status, int) else type(status).__name__
            statuses[key] = statuses.get(key, 0) + 1
    return streams, statuses


async def probe_caps(host: str, port: int, ids: list[str], held: int) -> dict[str, Any]:
    """Open connections up to and past `MAX_CONNECTIONS` (`held` are open already), and one principal's
    33rd stream: what each peer got."""
    import socket

    extra = MAX_CONNECTIONS - held + 50
    socks: list[socket.socket] = []
    answers: dict[str, int] = {}
    for _ in range(extra):
        try:
            s = socket.create_connection((host, port), timeout=5)
        except OSError as exc:
            answers[type(exc).__name__] = answers.get(type(exc).__name__, 0) + 1
            continue
        socks.append(s)
    await asyncio.sleep(0.5)
    for s in socks:
        s.setblocking(False)
        try:
            data = s.recv(4096)
        except BlockingIOError:
            data = b"(held open)"
        except OSError as exc:
            data = type(exc).__name__.encode()
        head = data.split(b"\r\n\r\n", 1)[0]
        retry = head.startswith(b"HTTP/1.1 503") and b"retry-after" in head.lower()
        key = "503 with Retry-After" if retry else data[:40].decode("latin-1")
        answers[key] = answers.get(key, 0) + 1
        s.close()
    await asyncio.sleep(1.0)
    # One principal (token 0) holds 25 streams; 8 more reach its cap of 32, the next is refused.
    mine = [n for n in range(len(ids)) if n % len(TOKENS) == 0][25:34]
    more: list[Stream] = []
    cap_statuses: list[int] = []
    for n in mine:
        s = Stream(host, port, headers_for(n, ids[n]))
        cap_statuses.append(await s.open())
        more.append(s)
    for s in more:
        s.close()
    return {"connections_past_the_cap": answers, "streams_of_one_principal_26th_to_34th": cap_statuses}


@contextmanager
def gateway(folder: Path, replicas: int) -> Generator[tuple[str, int, list[Served], RedisServer | None]]:
    with ExitStack() as stack:
        fast_port = free_port()
        fast = [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), str(fast_port)]
        stack.enter_context(running(fast, port=fast_port, what="fast upstream"))
        body = (
            "from connections import define_connection\n\n"
            f"connection = define_connection(url='http://127.0.0.1:{fast_port}/mcp', advertise_tools=True)\n"
        )
        project = make_project(folder / "project", {"fast": body}, tools=False)
        redis: RedisServer | None = None
        env = {"AGENT_SDK_BEARER_TOKEN": ",".join(TOKENS), "AGENT_SDK_MAX_CONNECTIONS": str(MAX_CONNECTIONS)}
        if replicas > 1:
            redis = RedisServer(folder / "redis")
            redis.start()
            stack.callback(redis.stop)
        url = redis.url if redis is not None else ""
        served = [start_replica(project, folder / f"r{i}", url, 10.0, env=env) for i in range(replicas)]
        for s in served:
            stack.callback(s.stop)
        await_healthy(served)
        if replicas == 1:
            yield "127.0.0.1", served[0].port, served, None
            return
        port = free_port()
        nginx_folder = folder / "nginx"
        nginx_folder.mkdir()
        (nginx_folder / "agent-sdk.conf").write_text(nginx_conf([s.port for s in served], port))
        main = main_conf(nginx_folder, f"access_log off;\ninclude {nginx_folder}/agent-sdk.conf;")
        main = main.replace("worker_connections 1024;", "worker_connections 4096;")
        (nginx_folder / "nginx.conf").write_text(main)
        cmd = [
            debian_bin("nginx"),
            "-p",
            str(nginx_folder),
            "-c",
            str(nginx_folder / "nginx.conf"),
            "-g",
            "daemon off;",
        ]
        stack.enter_context(running(cmd, port=port, what="nginx"))
        yield "127.0.0.1", port, served, redis


def redis_memory(redis: RedisServer | None) -> int:
    if redis is None:
        return 0
    import redis as redis_lib

    return int(redis_lib.Redis.from_url(redis.url).info("memory")["used_memory"])


async def run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with gateway(folder, args.replicas) as (host, port, served, redis):
        pids = [s.proc.pid for s in served]
        load = Load(host, port, args.sessions, args.wires)
        await load.spread(load.initialize, range(min(50, args.sessions)))  # warm: the upstream's wire, the lane
        await load.spread(load.call, range(min(50, args.sessions)))
        base_rss = [rss_kb(p) for p in pids]
        base_redis = redis_memory(redis)
        print(json.dumps(out), file=sys.stderr, flush=True)
        started = time.monotonic()
        await load.spread(load.initialize, range(args.sessions))
        out["initialize_s"] = round(time.monotonic() - started, 1)
        await load.spread(load.call, range(args.sessions))  # every session called once: now idle
        idle_rss = [rss_kb(p) for p in pids]
        out["rss_kb_per_idle_session"] = round((sum(idle_rss) - sum(base_rss)) / args.sessions, 3)
        out["redis_bytes_per_session"] = round((redis_memory(redis) - base_redis) / args.sessions, 1) if redis else None
        print(json.dumps(out), file=sys.stderr, flush=True)
        streams, statuses = await open_streams(host, port, load.ids, args.streams)
        out["streams_opened"] = statuses
        await asyncio.sleep(1.0)
        stream_rss = [rss_kb(p) for p in pids]
        out["rss_kb_per_stream"] = round((sum(stream_rss) - sum(idle_rss)) / max(1, args.streams), 2)
        calls_before, cpu_before, gen_before = load.calls, [cpu_s(p) for p in pids], time.process_time()
        load.latencies.clear()
        started = time.monotonic()
        print(json.dumps(out), file=sys.stderr, flush=True)
        await load.steady(args.every, args.seconds)
        took = time.monotonic() - started
        calls = load.calls - calls_before
        cpu = sum(cpu_s(p) for p in pids) - sum(cpu_before)
        ordered = sorted(load.latencies)
        out["steady"] = {
            "calls": calls,
            "calls_per_s": round(calls / took, 1),
            "gateway_cpu_ms_per_call": round(cpu * 1000 / max(1, calls), 3),
            "cpu_share_per_replica": [
                round((cpu_s(p) - before) / max(cpu, 1e-9), 3) for p, before in zip(pids, cpu_before, strict=True)
            ],
            "load_generator_cpu_ms_per_call": round((time.process_time() - gen_before) * 1000 / max(1, calls), 3),
            "p50_ms": round(ordered[len(ordered) // 2] * 1000, 2) if ordered else None,
            "p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 2) if ordered else None,
            "max_lag_s": round(load.lag, 2),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
        out["streams_still_open"] = sum(1 for s in streams if not s.ended)
        out["rss_mb_per_replica"] = [round(rss_kb(p) / 1024, 1) for p in pids]
        if args.replicas == 1:
            print(json.dumps(out), file=sys.stderr, flush=True)
            out["caps"] = await probe_caps(host, port, load.ids, args.streams + args.wires)
        for s in streams:
            s.close()
        print(json.dumps(out), file=sys.stderr, flush=True)
        out["restart"] = await restart(served, host, port, load, args, redis.url if redis is not None else "")
        out["errors"] = load.errors
        out["resent_on_a_connection_closed_while_idle"] = sum(w.resent for w in load.wires)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


async def restart(
    served: list[Served], host: str, port: int, load: Load, args: argparse.Namespace, redis_url: str
) -> dict[str, Any]:
    """kill -9 replica 0, start it again on its port (the same state root and key), until every stream is
    open again and every session's next call is answered (no new `initialize`)."""
    victim = served[0]
    os.kill(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait()
    for wire in load.wires:
        wire.close()
    started = time.monotonic()
    env = {"AGENT_SDK_BEARER_TOKEN": ",".join(TOKENS), "AGENT_SDK_MAX_CONNECTIONS": str(MAX_CONNECTIONS)}
    again = start_replica(
        victim.state_root.parent / "project", victim.state_root, redis_url, 10.0, victim.port, env=env
    )
    served[0] = again
    await asyncio.to_thread(await_healthy, [again])
    healthy = time.monotonic() - started
    streams, statuses = await open_streams(host, port, load.ids, args.streams)
    reopened = time.monotonic() - started
    errors_before = sum(load.errors.values())
    await load.spread(load.call, range(args.sessions))
    for s in streams:
        s.close()
    return {
        "to_health_s": round(healthy, 2),
        "to_streams_reopened_s": round(reopened, 2),
        "to_every_session_called_s": round(time.monotonic() - started, 2),
        "streams": statuses,
        "failed_calls_after_restart": sum(load.errors.values()) - errors_before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=1_000)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between one session's calls")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--wires", type=int, default=32)
    parser.add_argument("--replicas", type=int, default=1, choices=[1, 3])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        print(json.dumps(asyncio.run(run(args, Path(tmp))), indent=2))


if __name__ == "__main__":
    main()
