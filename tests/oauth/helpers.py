"""Small helpers shared by the oauth tests: call a tool through our auth, run the worker process, pass an
authorization server's pages without delivering its redirect."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oauth import ConnectionAuth
from oauth.flows._interaction import _Forms  # pyright: ignore[reportPrivateUsage]
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


def authorize(authorization_url: str, redirect_uri: str, *, login: str = "operator") -> str:
    """Follow an authorization URL through oidc-provider's login and consent forms, as a browser would
    (signing in as `login`), and answer the redirect back to `redirect_uri` (with its code and state)
    without sending it: the caller chooses which server receives it, and may send it twice."""
    url, data = authorization_url, None
    with httpx2.Client(follow_redirects=False, timeout=30.0) as browser:
        for _ in range(20):
            if url.startswith(redirect_uri):
                return url
            response = browser.get(url) if data is None else browser.post(url, data=data)
            if response.is_redirect:
                url, data = urljoin(url, response.headers["location"]), None
                continue
            assert response.status_code == 200, f"{response.status_code} at {url}"
            forms = _Forms()
            forms.feed(response.text)
            action, _, fields = next(f for f in forms.forms if f[1] == "post")
            data = {
                name: _field(kind, value, login) for name, kind, value in fields if kind not in ("submit", "button")
            }
            url = urljoin(str(response.url), action)
    raise AssertionError("the authorization server did not redirect back within 20 steps")


def _field(kind: str, value: str, login: str) -> str:
    return "any" if kind == "password" else value or login if kind in ("text", "email") else value
