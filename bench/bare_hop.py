"""The least a Python hop costs: uvicorn (httptools, uvloop, as `serve` runs) and an ASGI app that forwards
each POST's body, as it came, over the gateway's own fast wire (`connections.client._transports._http1`)
to one upstream and writes the upstream's answer back. No MCP: no parsing, no checks, no lookup, no pool.

    .venv/bin/python bench/bare_hop.py PORT UPSTREAM_URL
    .venv/bin/python bench/bare_hop.py PORT -            # no upstream: uvicorn answers a fixed echo result
    .venv/bin/python bench/bare_hop.py PORT UPSTREAM_URL granian-asgi   # the same app on Granian (one worker)
    .venv/bin/python bench/bare_hop.py PORT UPSTREAM_URL granian-rsgi   # Granian's own interface (RSGI)

`bench/bench_floor.py` runs it beside nginx and the gateway: its CPU per call is the floor under the
gateway's (docs/performance.md, "The floor under a Python hop").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import uvicorn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from connections.client._transports._http1 import Http1Origin  # noqa: E402

_FORWARDED = frozenset(
    {b"accept", b"content-type", b"mcp-protocol-version", b"mcp-method", b"mcp-name", b"mcp-session-id"}
)


_FIXED = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: benchmark"}],"isError":false}}'
_FIXED_HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(_FIXED)).encode())]


async def fixed_answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The inbound half alone: read the body, answer a fixed result (the id does not matter to the bench's clients)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": _FIXED_HEADERS})
    await send({"type": "http.response.body", "body": _FIXED})


def app_for(upstream: str) -> Any:
    if upstream == "-":
        return fixed_answer
    origin: Http1Origin | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal origin
        if scope["type"] != "http":
            return
        if origin is None:  # on the server's loop
            origin = Http1Origin(upstream, ssl_context=None, connect_timeout=5.0)
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k in _FORWARDED]
        response = await origin.request(scope["method"], headers, b"".join(chunks))
        try:
            body = await response.read()
            kept = [(k, v) for k, v in response.header_items() if k in ("content-type", "mcp-session-id")]
            status = response.status
        finally:
            response.release()
        out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in kept]
        out.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})

    return app


def rsgi_app_for(upstream: str) -> Any:
    """The same forwarding on Granian's RSGI interface (`scope.headers` a mapping, the body one await)."""
    origin: Http1Origin | None = None
    fixed_headers = [(k.decode(), v.decode()) for k, v in _FIXED_HEADERS]

    async def app(scope: Any, protocol: Any) -> None:
        nonlocal origin
        body = await protocol()
        if upstream == "-":
            protocol.response_bytes(200, fixed_headers, _FIXED)
            return
        if origin is None:
            origin = Http1Origin(upstream, ssl_context=None, connect_timeout=5.0)
        headers = [(k, v) for k, v in scope.headers.items() if k.encode() in _FORWARDED]
        response = await origin.request(scope.method, headers, body)
        try:
            answer = await response.read()
            kept = [(k, v) for k, v in response.header_items() if k in ("content-type", "mcp-session-id")]
            status = response.status
        finally:
            response.release()
        kept.append(("content-length", str(len(answer))))
        protocol.response_bytes(status, kept, answer)

    return app


def granian_asgi() -> Any:
    """Granian's factory target: the ASGI app for $BARE_HOP_UPSTREAM."""
    return app_for(os.environ["BARE_HOP_UPSTREAM"])


def granian_rsgi() -> Any:
    return rsgi_app_for(os.environ["BARE_HOP_UPSTREAM"])


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2]
    server = sys.argv[3] if len(sys.argv) > 3 else "uvicorn"
    if server.startswith("granian-"):
        from granian import Granian

        os.environ["BARE_HOP_UPSTREAM"] = upstream
        interface = server.removeprefix("granian-")
        Granian(
            f"bench.bare_hop:granian_{interface}", address="127.0.0.1", port=port, interface=interface, workers=1,
            loop="uvloop", http="1", factory=True, log_enabled=False, working_dir=ROOT,
        ).serve()  # fmt: skip
        return
    uvicorn.run(
        app_for(upstream), host="127.0.0.1", port=port, http="httptools", loop="uvloop", lifespan="off",
        access_log=False, log_level="warning",
    )  # fmt: skip


if __name__ == "__main__":
    main()
