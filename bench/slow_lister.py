"""A minimal MCP upstream for the turn-build benchmark: answers `tools/list` after L ms, cheaply.

    python bench/slow_lister.py PORT LATENCY_MS

It speaks just enough of the handshake protocol (2025-11-25, JSON responses, no session id) for
`protocol="legacy"` connections: `initialize`, notifications, `ping`, `tools/list` (two tools,
prefixed by the `X-Tool-Prefix` header so many connections can share one process). A raw ASGI
app on uvicorn keeps its own CPU per request far below the SDK server's, so the benchmark measures
the builder and not the upstream.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import uvicorn

VERSION = "2025-11-25"


def make_app(latency: float) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": [(b"allow", b"POST")]})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        headers = dict(scope["headers"])
        prefix = headers.get(b"x-tool-prefix", b"").decode()
        if "id" not in request:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        method = request["method"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "slow-lister", "version": "1"},
            }
        elif method == "tools/list":
            await asyncio.sleep(latency)
            result = {
                "tools": [
                    {
                        "name": f"{prefix}_{name}" if prefix else name,
                        "description": f"tool {name}",
                        "inputSchema": {"type": "object", "properties": {}},
                    }
                    for name in ("a", "b")
                ]
            }
        else:
            result = {}
        payload = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


if __name__ == "__main__":
    uvicorn.run(make_app(float(sys.argv[2]) / 1000), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
