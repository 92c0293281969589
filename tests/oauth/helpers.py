"""Small helpers shared by the oauth tests: call a tool through our auth, run the worker process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oauth import ConnectionAuth
from tests.peers import ROOT

WORKER = Path(__file__).resolve().parent / "client_worker.py"


async def call_echo(url: str, auth: ConnectionAuth, text: str) -> str:
    """`tools/call echo` through an httpx2 client carrying `auth`; returns the echoed text."""
    async with httpx2.AsyncClient(auth=auth, timeout=30.0) as http:
        with anyio.fail_after(30):
            async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
                result = await client.call_tool("echo", {"text": text})
    assert not result.is_error
    block = result.content[0]
    assert block.type == "text"
    return block.text


async def run_worker(
    state_root: Path, connection: str, url: str, *, calls: int, rounds: int, until: float
) -> dict[str, Any]:
    """Run `client_worker.py` in a new process; returns its JSON report."""
    cmd = [sys.executable, str(WORKER), str(state_root), connection, url, str(calls), str(rounds), str(until)]
    with anyio.fail_after(100):
        done = await anyio.run_process(
            cmd, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])
