"""A cheap load generator for `bench/bench_scale.py`: raw HTTP/1.1 over asyncio sockets.

One `Wire` is one keep-alive connection sending one request at a time and reading the answer by its
`content-length` (or chunks); thousands of handshake-era MCP sessions share a few dozen wires, as a
real fleet of peers behind a few egress proxies would. A `Stream` is a GET stream held open.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["Stream", "Wire", "call_body", "initialize_body"]

HANDSHAKE = "2025-11-25"


def initialize_body(n: int) -> bytes:
    params = {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": f"p{n}", "version": "1"}}
    return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).encode()


def call_body(n: int, text: str) -> bytes:
    params = {"name": "echo", "arguments": {"message": text}}
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode()


class Wire:
    """One keep-alive connection to `host:port`."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.resent = 0
        """Requests sent again because the server had closed the idle connection they were first sent on."""

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        """The connection, and whether it was opened just now (a reused one may have been closed while idle)."""
        if self._reader is None or self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            return self._reader, self._writer, True
        return self._reader, self._writer, False

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def post(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        """POST and read the answer: (status, lower-cased headers, body). Raises `OSError`, `ConnectionError`
        or `asyncio.IncompleteReadError` when the connection breaks (it is reopened on the next request).

        A kept-alive connection the server closed while it sat idle (its keep-alive timeout) answers the next
        request with nothing at all: that request is sent once more on a new connection, as HTTP clients do
        (the server never read it)."""
        reused = not (await self._open())[2]
        try:
            return await self._post(path, headers, body)
        except (ConnectionResetError, BrokenPipeError, asyncio.IncompleteReadError) as exc:
            nothing = not isinstance(exc, asyncio.IncompleteReadError) or not exc.partial
            if not (reused and nothing):
                raise
            self.resent += 1
            return await self._post(path, headers, body)

    async def _post(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        reader, writer, _ = await self._open()
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        try:
            status, answer_headers = await read_head(reader)
            if "content-length" in answer_headers:
                data = await reader.readexactly(int(answer_headers["content-length"]))
            elif answer_headers.get("transfer-encoding") == "chunked":
                data = await _chunks(reader)
            else:
                data = await reader.read()
                self.close()
        except BaseException:
            self.close()
            raise
        if answer_headers.get("connection") == "close":
            self.close()
        return status, answer_headers, data


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    out = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return out
        out += await reader.readexactly(size)
        await reader.readexactly(2)


class Stream:
    """A GET stream on `/v1/mcp/tools` for one session, held open until `close`."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port, self.headers = host, port, headers
        self.status = 0
        self.ended = False
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> int:
        """Send the GET and read its head; the status (200: held open, read in the background)."""
        reader, self._writer = await asyncio.open_connection(self.host, self.port)
        head = ["GET /v1/mcp/tools HTTP/1.1", f"Host: {self.host}:{self.port}", "Accept: text/event-stream"]
        head += [f"{k}: {v}" for k, v in self.headers.items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        self.status, _ = await read_head(reader)
        if self.status == 200:
            self._task = asyncio.create_task(self._drain(reader))
        else:
            self._writer.close()
        return self.status

    async def _drain(self, reader: asyncio.StreamReader) -> None:
        while await reader.read(4096):
            pass
        self.ended = True

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._writer is not None:
            self._writer.close()


def answer_ok(status: int, body: bytes, text: str) -> bool:
    """A 200 whose JSON-RPC result echoes `text` and is not an error."""
    if status != 200:
        return False
    if body.startswith((b"event:", b"data:")):  # an SSE answer: its last data line
        body = [line for line in body.split(b"\n") if line.startswith(b"data:")][-1][5:]
    try:
        answer: Any = json.loads(body)
    except ValueError:
        return False
    result = answer.get("result") if isinstance(answer, dict) else None
    return isinstance(result, dict) and not result.get("isError") and text in json.dumps(result)
