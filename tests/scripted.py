"""Scripted HTTP servers for wire tests: a real asyncio TCP server on loopback whose script writes exact bytes.

Used where a reference server cannot be made to produce an edge case of HTTP/1.1 framing (RFC 9112
§6.3) on demand. Nothing of the client's wire is mocked: the tests watch what the server sees
(connections opened, connections the client closed) and what the caller gets.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

Script = Callable[["Peer"], Awaitable[None]]


@dataclass
class Peer:
    """One accepted connection, as the script sees it."""

    index: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    async def request(self) -> bytes | None:
        """The next request's body (its head read and dropped); None when the client closed the connection."""
        found = await self.read()
        return None if found is None else found[2]

    async def read(self) -> tuple[str, dict[str, str], bytes] | None:
        """The next request's method, headers (lower-case names) and body; None when the client closed."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        first, *lines = head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return first.split(" ")[0], headers, body

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def closed_by_client(self) -> None:
        """Until the client closes its end."""
        while await self.reader.read(65536):
            pass


@dataclass
class Scripted:
    port: int
    accepted: int = 0
    closed_by_client: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def until(self, condition: Callable[[Scripted], bool]) -> None:
        with anyio.fail_after(10):
            while not condition(self):
                await self.changed.wait()

    def note(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[Scripted]:
    """A loopback server running `script` on every connection; counts opens and client closes."""
    state = Scripted(port=0)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.accepted += 1
        state.note()
        try:
            await script(Peer(state.accepted, reader, writer))
            if await reader.read(1) == b"":
                state.closed_by_client += 1
                state.note()
        except (ConnectionError, asyncio.IncompleteReadError):
            state.closed_by_client += 1
            state.note()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await server.wait_closed()


def ok(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{line}\r\n" for line in extra)
    return f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n{head}\r\n".encode() + body


def answer(request_id: Any, result: dict[str, Any]) -> bytes:
    """A 200 JSON answer carrying a JSON-RPC result."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    return ok(body, "content-type: application/json")


Tools = Callable[[Peer, dict[str, Any]], Awaitable[None]]


def handshake_server(on_tools_call: Tools) -> Callable[[Peer], Awaitable[None]]:
    """A minimal handshake-era (2025-11-25) Streamable HTTP MCP endpoint that sends no `Mcp-Session-Id`.

    It answers `initialize`, `tools/list` (one tool, `echo`) and notifications as the spec says, GET
    with 405 (no standing stream), and hands every `tools/call` to `on_tools_call`, which writes the
    exact answer under test.
    """

    async def script(peer: Peer) -> None:
        while (found := await peer.read()) is not None:
            method, _, body = found
            if method != "POST":
                await peer.send(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
                continue
            message = json.loads(body)
            if "id" not in message:
                await peer.send(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            elif message["method"] == "initialize":
                init = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted", "version": "1"},
                }
                await peer.send(answer(message["id"], init))
            elif message["method"] == "tools/list":
                echo = {"name": "echo", "inputSchema": {"type": "object"}}
                await peer.send(answer(message["id"], {"tools": [echo]}))
            else:
                await on_tools_call(peer, message)

    return script
