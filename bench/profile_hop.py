"""Where one plain `tools/call` through `/v1/mcp/tools` spends its time, in one process.

    .venv/bin/python bench/profile_hop.py                         # 2026-07-28 peer, fast upstream
    .venv/bin/python bench/profile_hop.py --version 2025-11-25    # a handshake-era peer
    .venv/bin/python bench/profile_hop.py --calls 3000 --top 40

The gateway app (`create_app`, its own lifespan: broker, pool, catalog) is driven in process through
`httpx2.ASGITransport`, as uvicorn would drive it (the lifespan state in every request's scope, the
peer's uid set once per connection), in front of `bench/fast_upstream.py` (a subprocess: its CPU is
not ours). It prints, as Markdown:

1. the functions of `gateway`, `connections` and `oauth` one plain call enters, in the order it first
   enters them (`sys.setprofile`), with how often each is entered (a coroutine's resume counts);
2. the CPU one call costs in this process, without a profiler, beside the same client against a
   trivial ASGI app that answers a fixed JSON body (what the client and the transport cost alone);
3. a cProfile of `--calls` calls: our functions by inclusive time, the library functions our code
   calls directly by inclusive time along that edge (where the time goes: parsing, validation,
   serialisation, the wire), and own time by area (package).

Figures are microseconds per `tools/call`, inflated by the profiler (about 2x); read them as shares.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import httpx2
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.harness import FAST_UPSTREAM, HANDSHAKE, MODERN, free_port, wait_port  # noqa: E402

OURS = tuple(str(ROOT / package) + os.sep for package in ("gateway", "connections", "oauth"))
ARGUMENTS = {"message": "benchmark"}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


def _ours(filename: str) -> bool:
    return filename.startswith(OURS)


def _name(filename: str, qualname: str) -> str:
    return f"{Path(filename).relative_to(ROOT).with_suffix('').as_posix().replace('/', '.')}.{qualname}"


@asynccontextmanager
async def gateway(
    upstream: str, tmp: Path, ttl: float, *, policy: bool = False, **settings: Any
) -> AsyncGenerator[ASGIApp]:
    """The app for a project with one advertised connection to `upstream`, its lifespan entered; the
    ASGI callable hands every request the lifespan state and the peer's uid, as `serve` does.
    `settings` are more `ServeSettings` fields (`bench/bench_oauth.py`: an OAuth issuer)."""
    from connections import load_project
    from gateway.app import create_app
    from gateway.http.protocol import PEER_UID
    from gateway.settings import ServeSettings

    project = tmp / "project"
    (project / "agent" / "mcp-connections").mkdir(parents=True)
    (project / "agent" / "mcp-connections" / "upstream.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={upstream!r}, advertise_tools=True)\n"
    )
    if policy:
        (project / "agent" / "policies.cedar").write_text("permit(principal, action, resource);\n")
    app = create_app(load_project(project), ServeSettings(state_root=tmp / "state", toolset_ttl_s=ttl, **settings))
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)
    uid = os.geteuid()

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        scope = {**scope, "state": state.copy(), "extensions": {PEER_UID: uid}}
        await app(scope, receive, send)

    async def run_lifespan() -> None:
        await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}, app_inbox.receive, app_outbox.send)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_lifespan)
        await to_app.send({"type": "lifespan.startup"})
        if (started := await from_app.receive())["type"] != "lifespan.startup.complete":
            raise SystemExit(f"the gateway did not start: {started}")
        try:
            yield served
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            await from_app.receive()


async def fixed_answer(scope: Scope, receive: Receive, send: Send) -> None:
    """The floor: a trivial app that reads the body and answers a fixed tools/call result."""
    while (await receive()).get("more_body"):
        pass
    body = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: benchmark"}],"isError":false}}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Peer:
    """A raw JSON-RPC peer of `version` on one httpx2 client (the handshake first, for a 2025-11-25 peer)."""

    def __init__(self, http: httpx2.AsyncClient, version: str, token: str | None = None) -> None:
        self.http, self.version, self.next_id = http, version, 0
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if token:
            self.headers["authorization"] = f"Bearer {token}"

    async def open(self) -> None:
        if self.version == MODERN:
            self.headers |= {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"}
            return
        init = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        response = await self.http.post("/v1/mcp/tools", json=self._request("initialize", init), headers=self.headers)
        response.raise_for_status()
        if "mcp-session-id" in response.headers:
            self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = HANDSHAKE
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.http.post("/v1/mcp/tools", json=note, headers=self.headers)

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        return {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}

    async def call(self) -> None:
        params: dict[str, Any] = {"name": "echo", "arguments": ARGUMENTS}
        if self.version == MODERN:
            params["_meta"] = ENVELOPE
        response = await self.http.post("/v1/mcp/tools", json=self._request("tools/call", params), headers=self.headers)
        message = response.json()
        if response.status_code != 200 or "error" in message or message["result"].get("isError"):
            raise SystemExit(f"the call failed: {response.status_code} {message}")


@dataclass(slots=True)
class Entered:
    """What one call entered of ours: each function (first-entry order) with its entry count and module,
    and how often consecutive entries changed package (gateway, connections, oauth)."""

    functions: dict[str, tuple[int, str]] = field(default_factory=dict[str, tuple[int, str]])
    crossings: int = 0
    _package: str = ""

    def enter(self, filename: str, qualname: str) -> None:
        module = _module(filename)
        name = f"{module}.{qualname}"
        count, _ = self.functions.get(name, (0, module))
        self.functions[name] = (count + 1, module)
        package = module.split(".", 1)[0]
        if self._package and package != self._package:
            self.crossings += 1
        self._package = package


async def entered(peer: Peer) -> Entered:
    """Our functions one call enters (`sys.setprofile`: this thread, so the loop's callbacks for the
    call, such as the upstream wire's reads, count too)."""
    seen = Entered()

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and _ours(frame.f_code.co_filename):
            seen.enter(frame.f_code.co_filename, frame.f_code.co_qualname)

    sys.setprofile(hook)
    try:
        await peer.call()
    finally:
        sys.setprofile(None)
    return seen


# Which job each of our modules does on a call's path (the rows of the "by job" table); a module not
# named here is its own row, so a new module of the pipeline shows up by name.
MIDDLEWARE, METRICS, PEER_STATE, LOOKUP = "ASGI middleware chain", "metrics", "peer state", "tool lookup"
INBOUND, RESULT = "inbound: read, parse, check", "result: validate, shape, serialise"
POOL, WIRE = "pool and session", "upstream wire"
JOBS = {
    "gateway.http.request_ids": MIDDLEWARE,
    "gateway.auth.chain": MIDDLEWARE,
    "gateway.accounts.routes": MIDDLEWARE,
    "gateway.app": MIDDLEWARE,
    "gateway.http_observer": METRICS,
    "gateway.metrics": METRICS,
    "gateway.http._asgi": INBOUND,
    "gateway.http.mcp_checks": INBOUND,
    "gateway.mcp.endpoints": INBOUND,
    "gateway.mcp.lane": INBOUND,
    "gateway.mcp.tasks": PEER_STATE,
    "gateway.mcp.task_ext": PEER_STATE,
    "gateway.mcp.call_stream": PEER_STATE,
    "gateway.mcp.peers.sessions": PEER_STATE,
    "gateway.mcp.peers.calls": PEER_STATE,
    "gateway.mcp.peers.input": PEER_STATE,
    "gateway.state.request_state": PEER_STATE,
    "gateway.mcp.toolsets": LOOKUP,
    "connections.turns._toolset": LOOKUP,
    "connections.turns._turns": LOOKUP,
    "connections.client._listing_cache": LOOKUP,
    "connections.project._pin_guard": LOOKUP,
    "connections.project._names": LOOKUP,
    "connections.host._host": LOOKUP,
    "connections.account._account": LOOKUP,
    "gateway.mcp.tools": RESULT,
    "gateway.http.json_pieces": RESULT,
    "connections.client._tool_results": RESULT,
    "connections.client._fast_answers": RESULT,
    "connections.turns._outcomes": RESULT,
    "connections.serving._broker": POOL,
    "connections.pool._pool": POOL,
    "connections.client._session_runner": POOL,
    "connections.client._clients": POOL,
    "connections.client._identity": POOL,
    "connections._call_context": POOL,
    "connections.client._input_requests": POOL,
    "connections.client._restart": POOL,
    "connections.client._tracing": POOL,
    "connections.project._definitions": POOL,
    "connections.client._fast_calls": WIRE,
    "connections.client._keepalive": WIRE,
}
# Functions of the lane that are the result's shaping, not the request's checks.
RESULT_FUNCTIONS = frozenset({"_shaped", "_serialized", "_write", "_stamp", "_send_jsonrpc"})


def _module(filename: str) -> str:
    return Path(filename).relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")


def _job(filename: str, name: str) -> str:
    module = _module(filename)
    if module.endswith(".lane") and name in RESULT_FUNCTIONS:
        return RESULT
    if module.startswith("connections.client._transports."):
        return WIRE
    return JOBS.get(module, f"other ({module})")


def _area(filename: str, name: str) -> str:
    if _ours(filename):
        return Path(filename).relative_to(ROOT).parts[0]
    if filename == "~":
        if "epoll" in name or "select.select" in name:
            return "waiting: the event loop's poll (idle, not CPU)"
        return "builtins (C)"
    parts = Path(filename).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if not filename.startswith(("/", "<")) and len(parts) > 1:  # py-spy names a file from its sys.path entry
        return parts[0]
    return "stdlib: " + Path(filename).stem


def report_profile(profile: cProfile.Profile, calls: int, top: int) -> None:
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # pyright: ignore[reportAttributeAccessIssue]
    per = 1e6 / calls

    def label(func: tuple[str, int, str]) -> str:
        filename, _, name = func
        if _ours(filename):
            return _name(filename, name)
        return f"{_area(filename, name)}: {name}"

    print(f"\n### our functions by inclusive time (µs per call, {calls} calls, under cProfile)\n")
    print("| function | entered per call | own µs | inclusive µs |")
    print("|---|---:|---:|---:|")
    ours: list[tuple[Any, Any]] = [(func, row) for func, row in stats.items() if _ours(func[0])]
    ours.sort(key=lambda item: -item[1][3])
    for func, (_cc, nc, tt, ct, _callers) in ours[:top]:
        print(f"| `{label(func)}` | {nc / calls:.1f} | {tt * per:.1f} | {ct * per:.1f} |")

    # A library function our code calls, by the time spent in it along that edge, less the time it
    # spent back in our code (a callback): the library work each of our functions asks for.
    back_in_ours: dict[Any, float] = defaultdict(float)
    for func, (_cc, _nc, _tt, _ct, callers) in stats.items():
        if _ours(func[0]):
            for caller, (_n, _c, _t, ct) in callers.items():
                if not _ours(caller[0]):
                    back_in_ours[caller] += ct
    edges: dict[Any, list[float]] = defaultdict(lambda: [0.0, 0.0])
    asked: dict[Any, float] = defaultdict(float)  # our function -> library time it asked for
    callers_of: dict[Any, Counter[str]] = defaultdict(Counter)
    for func, (_cc, _nc, _tt, total, callers) in stats.items():
        if _ours(func[0]):
            continue
        own_share = max(0.0, 1 - back_in_ours[func] / total) if total else 0.0
        for caller, (nc, _ccc, _tt2, ct) in callers.items():
            if _ours(caller[0]):
                edges[func][0] += nc
                edges[func][1] += ct * own_share
                asked[caller] += ct * own_share
                callers_of[func][caller[2]] += nc
    print("\n### library functions our code calls directly (µs per call along that edge, less callbacks into ours)\n")
    print("| library function | called per call | µs | from |")
    print("|---|---:|---:|---|")
    for func, (nc, ct) in sorted(edges.items(), key=lambda item: -item[1][1])[:top]:
        sources = ", ".join(name for name, _ in callers_of[func].most_common(3))
        print(f"| `{label(func)}` | {nc / calls:.1f} | {ct * per:.1f} | {sources} |")

    jobs: Counter[str] = Counter()
    for func, (_cc, _nc, tt, _ct, _callers) in ours:
        jobs[_job(func[0], func[2])] += tt + asked[func]
    total_ours = sum(jobs.values())
    print("\n### by job: our functions' own time plus the library work they call directly (µs per call)\n")
    print("| job | µs | share |")
    print("|---|---:|---:|")
    for job, spent in jobs.most_common():
        print(f"| {job} | {spent * per:.1f} | {spent / total_ours:.1%} |")
    print(f"| all of it | {total_ours * per:.1f} | 100% |")

    print("\n### own time by area (µs per call; the client's httpx2 and the transport included)\n")
    areas: Counter[str] = Counter()
    for (filename, _, name), (_cc, _nc, tt, _ct, _callers) in stats.items():
        areas[_area(filename, name)] += tt
    total = sum(areas.values())
    print("| area | own µs | share |")
    print("|---|---:|---:|")
    for area, tt in areas.most_common(top):
        print(f"| {area} | {tt * per:.1f} | {tt / total:.1%} |")
    print(f"| all | {total * per:.1f} | 100% |")


def report_stacks(path: Path, top: int) -> None:
    """Summarise py-spy's raw (collapsed) stacks of a real `serve` (`bench_mcp_tools.py --py-spy FILE`):
    the share of the samples in which each of our functions, each job, and each library is on the stack."""
    frame = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*):\d+\)$")
    total = start_up = 0
    inclusive: Counter[str] = Counter()
    jobs: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        if any(part.startswith("<module> ") for part in stack.split(";")[1:]):
            start_up += count  # an import: the server starting, not serving
            continue
        total += count
        seen: set[str] = set()
        seen_jobs: set[str] = set()
        leaf = "?"
        for part in stack.split(";"):
            match = frame.match(part)
            if match is None:
                continue
            filename = match["file"]
            if filename.startswith(("gateway/", "connections/", "oauth/")):
                filename = str(ROOT / filename)
            name = match["name"]
            if _ours(filename):
                seen.add(_name(filename, name))
                seen_jobs.add(_job(filename, name))
                leaf = "ours"
            else:
                leaf = _area(filename, name)
        for name in seen:
            inclusive[name] += count
        for job in seen_jobs:
            jobs[job] += count
        leaves[leaf] += count
    if not total:
        raise SystemExit(f"{path}: no stacks (py-spy's raw format: one 'frame;frame;... count' per line)")
    print(f"### {path.name}: {total} samples of the gateway on CPU serving ({start_up} more while it started)\n")
    print("| our function on the stack | share of samples |\n|---|---:|")
    for name, count in inclusive.most_common(top):
        print(f"| `{name}` | {count / total:.1%} |")
    print("\n| job on the stack | share |\n|---|---:|")
    for job, count in jobs.most_common():
        print(f"| {job} | {count / total:.1%} |")
    print("\n| where the sample was (innermost frame's package) | share |\n|---|---:|")
    for leaf, count in leaves.most_common(top):
        print(f"| {leaf} | {count / total:.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--version", choices=(MODERN, HANDSHAKE), default=MODERN, help="the peer's protocol")
    parser.add_argument("--calls", type=int, default=2000, help="calls under cProfile (and without it)")
    parser.add_argument("--top", type=int, default=30, help="rows per table")
    parser.add_argument(
        "--listing",
        choices=("fresh", "expired"),
        default="fresh",
        help="the catalog's reused listing: fresh (within its ttl) or expired (a ttl of 0: every call lists its "
        "tool's connection, as every call past the 30 s did before the catalog kept that listing)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="policy (a permit-all agent/policies.cedar) and a bearer token on; the audit file is always on",
    )
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the event loop")
    parser.add_argument("--no-pin", action="store_true", help="do not pin this process and the upstream to a core each")
    parser.add_argument("--dump", type=Path, help="also write the cProfile stats here (pstats format)")
    parser.add_argument("--stacks", type=Path, help="only summarise py-spy raw stacks of a real serve from this file")
    args = parser.parse_args()
    if args.stacks:
        report_stacks(args.stacks, args.top)
        return

    with tempfile.TemporaryDirectory() as tmp_name:
        port = free_port()
        upstream = subprocess.Popen(
            [sys.executable, str(FAST_UPSTREAM), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            wait_port(port, upstream, "fast upstream")
            if not args.no_pin and len(os.sched_getaffinity(0)) >= 2:
                # One core each: under a wall-clock profiler, the upstream waking on our core would be
                # charged to the socket write that woke it.
                first, second, *_ = sorted(os.sched_getaffinity(0))
                os.sched_setaffinity(upstream.pid, {second})
                os.sched_setaffinity(0, {first})
            options = {"use_uvloop": args.loop == "uvloop"}  # uvloop: what `serve` runs on (uvicorn's "auto")
            anyio.run(profile_all, f"http://127.0.0.1:{port}/mcp", Path(tmp_name), args, backend_options=options)
        finally:
            upstream.terminate()
            upstream.wait(timeout=10)


async def profile_all(upstream: str, tmp: Path, args: argparse.Namespace) -> None:
    ttl = 3600.0 if args.listing == "fresh" else 0.0
    token = "bench-token-0123456789abcdef" if args.full else None
    extra: dict[str, Any] = {"policy": True, "bearer_tokens": (token,)} if args.full else {}
    async with gateway(upstream, tmp, ttl, **extra) as app:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as http:
            peer = Peer(http, args.version, token)
            await peer.open()
            for _ in range(200):  # warm: the pool's session, the listing, caches
                await peer.call()
            report_entered(await entered(peer))
            floor_transport = httpx2.ASGITransport(app=fixed_answer)
            async with httpx2.AsyncClient(transport=floor_transport, base_url="http://127.0.0.1:8080") as floor_http:
                floor = Peer(floor_http, MODERN)
                await floor.open()
                await measure_cpu(peer, floor, args.calls)
            profile = cProfile.Profile()  # wall time: the loop's wait on the upstream is the poll's, not ours
            profile.enable()
            for _ in range(args.calls):
                await peer.call()
            profile.disable()
            if args.dump:
                profile.dump_stats(args.dump)
            report_profile(profile, args.calls, args.top)


def report_entered(seen: Entered) -> None:
    rows = seen.functions
    print(f"### our functions one plain call enters, in order ({len(rows)} distinct)\n")
    print("| # | function | entered |")
    print("|---:|---|---:|")
    for i, (name, (count, _)) in enumerate(rows.items(), 1):
        print(f"| {i} | `{name}` | {count} |")
    comprehension = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>")
    plain = [module for name, (_, module) in rows.items() if not name.endswith(comprehension)]
    print(
        f"\n{len(rows)} distinct functions; {len(plain)} without comprehensions, in {len(set(plain))} modules; "
        f"consecutive entries change package {seen.crossings} times"
    )


async def measure_cpu(peer: Peer, floor: Peer, calls: int) -> None:
    gateway_cpu = floor_cpu = 0.0
    for _ in range(3):  # interleaved, so the box's drift hits both alike
        start = time.process_time()
        for _ in range(calls // 3):
            await peer.call()
        gateway_cpu += time.process_time() - start
        start = time.process_time()
        for _ in range(calls // 3):
            await floor.call()
        floor_cpu += time.process_time() - start
    n = 3 * (calls // 3)
    print("\n### CPU per call in this process, no profiler\n")
    print("| path | µs per call |")
    print("|---|---:|")
    print(f"| client + ASGITransport + the gateway app | {gateway_cpu / n * 1e6:.0f} |")
    print(f"| client + ASGITransport + a fixed answer | {floor_cpu / n * 1e6:.0f} |")
    print(f"| the gateway's share (the difference) | {(gateway_cpu - floor_cpu) / n * 1e6:.0f} |")


if __name__ == "__main__":
    main()
