"""What an OAuth-authenticated `/v1/mcp/tools` call costs the gateway over a static bearer one.

    .venv/bin/python bench/bench_oauth.py [--calls 3000] [--concurrency 8] [--phase 100] [--runs 5]

One `agent-sdk serve --oauth-issuer ... --bearer-token ...` in front of the fast `mcp` 2.x upstream
(`bench/fast_upstream.py`), oidc-provider (`tests/oauth/oidc_provider.mjs`) as the issuer of a JWT
access token for the gateway's `/v1/mcp/tools` (client credentials, RS256). Three groups of raw
JSON-RPC clients at 2026-07-28 (`bench_mcp_tools.RawPeer`) call `echo`: with the static token, with
the static token and a header as long as the JWT (the control), and with the JWT, phases rotating so
drift on a busy machine hits all alike; the gateway's CPU per call comes from the scheduler's account of its threads
(`/proc/<pid>/task/*/schedstat`, nanoseconds) around each phase, and the figure to read is the median,
over the rounds, of each round's oauth phase minus its bearer phase (paired: free of the box's drift).
The target: OAuth at most 0.03 ms of gateway CPU per call more than bearer (docs/performance.md).

Then the auth chain alone, in this process: `AuthChain.__call__` to a no-op app for the static
token, for the JWT (admitted before: the digest cache), and for the JWT's first check (signature,
claims), in microseconds of CPU per request.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as bench  # noqa: E402
import profile_hop  # noqa: E402

from gateway.auth.chain import AuthChain  # noqa: E402
from gateway.auth.oauth_gate import oauth_gate  # noqa: E402
from gateway.settings import ServeSettings  # noqa: E402
from tests.oauth.peers import oidc_provider  # noqa: E402

STATIC = "bench-static-token-0123456789abcdef"


def jwt_for(issuer: str, resource: str) -> str:
    answer = httpx2.post(
        f"{issuer}/token",
        data={"grant_type": "client_credentials", "resource": resource, "scope": "mcp:tools"},
        auth=("jwt-service", "jwt-secret-0123456789"),
    )
    answer.raise_for_status()
    return answer.json()["access_token"]


async def end_to_end(
    url: str, tokens: dict[str, dict[str, str]], pid: int, args: argparse.Namespace
) -> dict[str, float]:
    clients = [httpx2.AsyncClient(timeout=60) for _ in range(args.concurrency * len(tokens))]
    try:
        peers: dict[str, list[Any]] = {name: [] for name in tokens}
        for index, http in enumerate(clients):
            name = list(tokens)[index % len(tokens)]
            peer = bench.RawPeer(url, http, bench.MODERN)
            await peer.open()
            peer.headers.update(tokens[name])
            peers[name].append(peer)
        for name in tokens:
            await bench.phase(peers[name], 20 * args.concurrency, [])
        cpu = dict.fromkeys(tokens, 0)
        counts = dict.fromkeys(tokens, 0)
        rounds: list[dict[str, float]] = []
        order = list(tokens)
        done = 0
        while done < args.calls:
            round_: dict[str, float] = {}
            for name in order:
                before = bench.cpu_ns(pid)
                samples: list[float] = []
                await bench.phase(peers[name], args.phase, samples)
                spent = bench.cpu_ns(pid) - before
                cpu[name] += spent
                counts[name] += len(samples)
                round_[name] = spent / 1e6 / len(samples)
            rounds.append(round_)
            order = order[1:] + order[:1]
            done += args.phase
    finally:
        for client in clients:
            await client.aclose()
    found = {name: cpu[name] / 1e6 / counts[name] for name in tokens}
    # Paired: each round ran every group once, back to back, so a round's difference is free of the box's
    # drift between rounds; the median of the rounds' differences is not moved by the odd phase that a
    # collection, an audit flush or another process landed on.
    for name in tokens:
        if name != "bearer":
            found[f"{name} - bearer, paired"] = statistics.median(r[name] - r["bearer"] for r in rounds)
    return found


async def chain_alone(issuer: str, token: str, rounds: int) -> dict[str, float]:
    settings = ServeSettings(oauth_issuers=(issuer,), port=3000)
    gate = oauth_gate(settings)
    await gate.start()

    async def app(_scope: Any, _receive: Any, _send: Any) -> None:
        return None

    chain = AuthChain(app, mode="oauth", bearer_tokens=[SecretStr(STATIC)], oauth=gate)

    def scope(value: str) -> dict[str, Any]:
        headers = [(b"host", b"127.0.0.1:3000"), (b"authorization", f"Bearer {value}".encode())]
        return {"type": "http", "method": "POST", "path": "/v1/mcp/tools", "headers": headers, "query_string": b""}

    async def per_call(value: str, fresh: bool) -> float:
        start = time.process_time()
        for _ in range(rounds):
            if fresh:
                gate.verifier._admitted.clear()  # pyright: ignore[reportPrivateUsage]
                gate._admissions.clear()  # pyright: ignore[reportPrivateUsage]
            await chain(scope(value), None, None)  # pyright: ignore[reportArgumentType]
        return 1e6 * (time.process_time() - start) / rounds

    await per_call(token, False)
    found = {"bearer": [], "oauth (cached)": [], "oauth (first check)": []}
    for _ in range(5):
        found["bearer"].append(await per_call(STATIC, False))
        found["oauth (cached)"].append(await per_call(token, False))
        found["oauth (first check)"].append(await per_call(token, True))
    return {name: statistics.median(values) for name, values in found.items()}


async def app_alone(issuer: str, upstream: str, tokens: dict[str, str], calls: int) -> dict[str, float]:
    """The whole app in this process (`profile_hop.gateway`: its lifespan, the fast upstream behind it), one
    peer per token, their calls alternating one by one (in a shuffled order each round) so every token
    meets the same moments of the box;
    the CPU of each call (`time.process_time`, this process: the client and the transport too, alike
    for every token) is added to its token's account. Microseconds per call."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"oauth_issuers": (issuer,), "bearer_tokens": (SecretStr(STATIC),), "port": 3000}
        async with profile_hop.gateway(upstream, Path(tmp), 30.0, **settings) as app:
            transport = httpx2.ASGITransport(app=app)
            peers: dict[str, Any] = {}
            for name, token in tokens.items():
                http = httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:3000")
                peer = profile_hop.Peer(http, bench.MODERN)
                await peer.open()
                peer.headers["authorization"] = f"Bearer {token}"
                peers[name] = peer
            spent = dict.fromkeys(tokens, 0.0)
            order, shuffled = list(peers), random.Random(1)
            for index in range(calls + 200):
                shuffled.shuffle(order)  # no token always follows the same one
                for name in order:
                    start = time.process_time()
                    await peers[name].call()
                    if index >= 200:  # the first calls warm the caches and the upstream connection
                        spent[name] += time.process_time() - start
            return {name: 1e6 * total / calls for name, total in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per group and run")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--phase", type=int, default=100, help="calls per phase")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=20000, help="requests per measure of the chain alone")
    parser.add_argument("--app-calls", type=int, default=5000, help="calls per token through the app in process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, oidc_provider(3600) as idp:
        root = Path(tmp)
        upstream_port = bench.free_port()
        upstream = bench.start_listening(
            [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), str(upstream_port)],
            upstream_port,
            "upstream",
            {},
        )
        project = root / "project" / "agent" / "mcp-connections"
        project.mkdir(parents=True)
        (project / "fast.py").write_text(
            "from connections import define_connection\n\n"
            f"connection = define_connection(url='http://127.0.0.1:{upstream_port}/mcp', advertise_tools=True)\n"
        )
        proc, port = bench.start_serve(
            root / "project",
            root / "state",
            *("--oauth-issuer", idp.issuer, "--bearer-token", STATIC),
            *("--timeout-keep-alive", "600"),  # a group's connections idle while the other groups run
        )
        try:
            url = f"http://127.0.0.1:{port}/v1/mcp/tools"
            jwt = jwt_for(idp.issuer, url)
            # The control: the static token plus a header as long as the JWT, so the table tells what the
            # larger request costs (parsing, copying) from what checking the token costs.
            tokens = {
                "bearer": {"authorization": f"Bearer {STATIC}"},
                "bearer+pad": {"authorization": f"Bearer {STATIC}", "x-pad": "p" * len(jwt)},
                "oauth": {"authorization": f"Bearer {jwt}"},
            }
            print(f"JWT: {len(jwt)} bytes; gateway CPU per call in ms (from /proc), phases of {args.phase} rotating\n")
            print(
                "| run | bearer | bearer + a JWT-sized header | oauth | oauth - bearer | oauth - (bearer + header) "
                "| oauth - bearer, median of paired rounds | header - bearer, paired |"
            )
            print("|---|---|---|---|---|---|---|---|")
            deltas: list[float] = []
            padded: list[float] = []
            paired: list[float] = []
            for run in range(1, args.runs + 1):
                cpu = anyio.run(end_to_end, url, tokens, proc.pid, args)
                deltas.append(cpu["oauth"] - cpu["bearer"])
                padded.append(cpu["oauth"] - cpu["bearer+pad"])
                paired.append(cpu["oauth - bearer, paired"])
                print(
                    f"| {run} | {cpu['bearer']:.3f} | {cpu['bearer+pad']:.3f} | {cpu['oauth']:.3f} "
                    f"| {deltas[-1]:+.3f} | {padded[-1]:+.3f} | {paired[-1]:+.3f} | "
                    f"{cpu['bearer+pad - bearer, paired']:+.3f} |"
                )
            print(
                f"\nmedian oauth - bearer: {statistics.median(deltas):+.3f} ms (paired rounds: "
                f"{statistics.median(paired):+.3f} ms); "
                f"oauth - (bearer + header): {statistics.median(padded):+.3f} ms\n"
            )
            token = jwt_for(idp.issuer, "http://127.0.0.1:3000/v1/mcp/tools")
            alone = anyio.run(chain_alone, idp.issuer, token, args.rounds)
            print("| the auth chain alone | µs CPU/request |")
            print("|---|---|")
            for name, value in alone.items():
                print(f"| {name} | {value:.1f} |")
            whole = {"bearer": STATIC, "bearer, a second peer (the noise floor)": STATIC, "oauth": token}
            found = anyio.run(app_alone, idp.issuer, f"http://127.0.0.1:{upstream_port}/mcp", whole, args.app_calls)
            print(f"\n| the whole app in process, calls alternating ({args.app_calls} each) | µs CPU/call |")
            print("|---|---|")
            for name, value in found.items():
                print(f"| {name} | {value:.1f} |")
            print(f"| oauth - bearer | {found['oauth'] - found['bearer']:+.1f} |")
        finally:
            proc.terminate()
            proc.wait(timeout=20)
            upstream.terminate()
            upstream.wait(timeout=20)


if __name__ == "__main__":
    main()
