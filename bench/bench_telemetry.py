"""What the request id and the metrics cost per call, measured in one run.

Two pieces run on every `tools/call` through `/v1/mcp/tools`:

- `RequestIds` (gateway/http/request_ids.py), the outermost ASGI middleware: an id, a context variable,
  a header on the answer;
- the turn builder's `CallObserver` wrap (`connections.observed`) reporting to `Metrics.call_finished`
  (a counter, a histogram);
- `HttpObserver` (gateway/http_observer.py): the request's route template and a histogram per request
  (the access line off, as by default).

Each is timed against the same work without it, in alternating rounds, on a trivial ASGI app and a
trivial tool, so the figure is the overhead alone (CPU time per call, in microseconds), to set beside
the gateway's whole CPU per call in docs/performance.md.

    .venv/bin/python bench/bench_telemetry.py            # about 20 s
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from connections import ToolOutcome, TurnTool
from connections.serving import observed
from gateway.http.request_ids import RequestIds
from gateway.http_observer import HttpObserver, RouteTemplates
from gateway.metrics import Metrics

_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}'


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": _BODY})


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(_message: Any) -> None:
    return None


def _scope() -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/v1/mcp/tools", "headers": [(b"host", b"127.0.0.1")]}


async def _outcome(_arguments: Any) -> ToolOutcome:
    return ToolOutcome(is_error=False, result={})


async def _per_call_us(run: Callable[[], Awaitable[None]], n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await run()
    return (time.process_time() - started) / n * 1e6


async def main(rounds: int, n: int) -> None:
    wrapped_app = RequestIds(_app)
    metrics = Metrics()
    tool = TurnTool(name="echo", description="", input_schema={}, source="advertised", invoke=_outcome, connection="up")
    watched = observed(tool, metrics)
    timed_app = HttpObserver(_app, RouteTemplates(["/v1/mcp/tools"], []), metrics, access_log=False)
    cases: dict[str, tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]] = {
        "RequestIds middleware": (
            lambda: _app(_scope(), _receive, _send),
            lambda: wrapped_app(_scope(), _receive, _send),
        ),
        "CallObserver + Metrics": (lambda: _call(tool), lambda: _call(watched)),
        "HttpObserver": (lambda: _app(_scope(), _receive, _send), lambda: timed_app(_scope(), _receive, _send)),
    }
    for name, (plain, with_it) in cases.items():
        base: list[float] = []
        extra: list[float] = []
        for _ in range(rounds):
            base.append(await _per_call_us(plain, n))
            extra.append(await _per_call_us(with_it, n))
        b, e = statistics.median(base), statistics.median(extra)
        print(f"{name:<24} without {b:7.2f} us  with {e:7.2f} us  overhead {e - b:6.2f} us per call")


async def _call(tool: TurnTool) -> None:
    await tool.call({})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.calls))
