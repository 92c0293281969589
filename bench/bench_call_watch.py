"""What a `tools/call` without a progress token pays on `/v1/mcp/tools` for being cancellable (#14).

    .venv/bin/python bench/bench_call_watch.py [--calls 20000] [--repeats 3]

Every lane call runs through `until_gone` (gateway/mcp/call_stream.py): registered under its principal and
request id (for the peer's `notifications/cancelled`), inside a cancel scope, with a task watching
the POST's connection for a disconnect. This times, in one process and one run, the same stand-in
call (two event-loop turns, as a call that awaits its upstream takes at least) awaited bare and
through `until_gone`, with `receive` waiting on an event as uvicorn's does. Prints CPU microseconds
per call for each and the difference: the hot path's added cost, to set beside the gateway's own CPU
per call in `bench_mcp_tools.py`'s tables.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from gateway.mcp.call_stream import JsonAnswer, until_gone
from gateway.mcp.peers.calls import PeerCalls


async def _call() -> dict[str, Any]:
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    return {"content": []}


async def _measure(calls: int, repeats: int) -> None:
    gone = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    peers = PeerCalls()
    print("| repeat | bare µs/call | through until_gone µs/call | added µs/call |")
    print("|---:|---:|---:|---:|")
    for repeat in range(1, repeats + 1):
        started = time.process_time()
        for _ in range(calls):
            await _call()
        bare = (time.process_time() - started) / calls * 1e6
        started = time.process_time()
        for ident in range(calls):
            await until_gone(receive, peers, ("anonymous", None), ident, _call(), JsonAnswer())
        watched = (time.process_time() - started) / calls * 1e6
        print(f"| {repeat} | {bare:.2f} | {watched:.2f} | {watched - bare:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(_measure(args.calls, args.repeats))


if __name__ == "__main__":
    main()
