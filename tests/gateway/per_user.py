"""Helpers of the per-user grant tests: a project with a `grants="per_principal"` connection, three peer
principals (bearer tokens), a raw 2026-07-28 `tools/call`, and a principal's sign-in through the URL the
gateway answered with (the gateway's `/v1/oauth/sign-in`, oidc-provider's login and consent pages, the
redirect back to `/v1/oauth/callback`) done with an HTTP client, as a browser would."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.to_thread
import httpx2
from anyio.streams.text import TextReceiveStream

from tests.oauth.helpers import authorize
from tests.peers import node20, node_module

from .conftest import Served, assert_clean, make_project, serve

THREE = ("alice", "bob", "carol")
PEERS = {name: f"{name}-peer-token-0123456789abcdef" for name in (*THREE, "dave", "erin", "frank")}
"""Each person's bearer token at the gateway: a principal each, `bearer:<digest>`."""
OPERATOR = "per-user-operator-token-0123456789"
MODERN = "2026-07-28"
JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
TS_SIGN_IN = Path(__file__).resolve().parent.parent / "fixtures" / "peers_js" / "ts_sign_in_client.mjs"
URL_IN_TEXT = re.compile(r"(https?://\S+/v1/oauth/sign-in\?ticket=[A-Za-z0-9._%-]+)")


def principal_of(name: str) -> str:
    """The gateway's id of `name`'s principal (`bearer:` and a digest prefix of its token)."""
    return "bearer:" + hashlib.sha256(PEERS[name].encode()).hexdigest()[:12]


def per_user_project(root: Path, resource_url: str) -> Path:
    """One connection, `docs`: the audience-checking MCP server, each principal with its own grant."""
    body = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={resource_url!r}, oauth=True, grants='per_principal', "
        "advertise_tools=True)\n"
    )
    return make_project(root, {"docs": body}, tools=False)


@contextmanager
def per_user_gateway(root: Path, resource_url: str) -> Iterator[Served]:
    """`agent-sdk serve` of `per_user_project` with the peers' tokens; its log holds none of them when it stops."""
    served = serve(per_user_project(root / "project", resource_url), root / "state", env=peer_env())
    try:
        yield served
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


def peer_env(**extra: str) -> dict[str, str]:
    return {"AGENT_SDK_BEARER_TOKEN": ",".join(PEERS.values()), "AGENT_SDK_OPERATOR_TOKEN": OPERATOR, **extra}


def call_body(tool: str, ident: int = 1, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "per-user-test", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta},
    }


def modern_headers(name: str, tool: str = "whoami") -> dict[str, str]:
    return {
        **JSON_HEADERS,
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": tool,
        "authorization": f"Bearer {PEERS[name]}",
    }


def whoami(http: httpx2.Client, base: str, name: str) -> dict[str, Any]:
    """`tools/call whoami` on `/v1/mcp/tools` as `name`, 2026-07-28, no capabilities declared; the result."""
    answer = http.post(f"{base}/v1/mcp/tools", json=call_body("whoami"), headers=modern_headers(name))
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def text_of(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


def sign_in_url_in(text: str) -> str:
    found = URL_IN_TEXT.search(text)
    assert found is not None, f"no sign-in URL in {text!r}"
    return found[1]


def sign_in(url: str, name: str, *, callback_base: str | None = None) -> httpx2.Response:
    """Open the sign-in `url` as `name` (its bearer token), log in at oidc-provider as `name`, and bring the
    redirect back to the gateway's callback (at `callback_base` when given: another replica). The callback's page."""
    with httpx2.Client(timeout=30.0, follow_redirects=False) as browser:
        opened = browser.get(url, headers={"authorization": f"Bearer {PEERS[name]}"})
        assert opened.status_code == 302, opened.text
        location = opened.headers["location"]
        gateway = f"{urlsplit(url).scheme}://{urlsplit(url).netloc}"
        redirect = authorize(location, f"{gateway}/v1/oauth/callback", login=name)
        if callback_base is not None:
            redirect = urljoin(callback_base, redirect[len(gateway) :])
        return browser.get(redirect)


async def ts_peer_signs_in(url: str, name: str, era: str, *, callback_base: str | None = None) -> dict[str, Any]:
    """The TypeScript SDK peer (`ts_sign_in_client.mjs`, `legacy` or `modern`) calls `whoami` as `name`; when it
    says which URL it was given, `name` signs in there (an HTTP client as the browser); its last report."""
    script = TS_SIGN_IN
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
        "MCP_CLIENT_DIR": str(node_module("@modelcontextprotocol", "client", "package.json").parent),
        "MCP_HEADERS": json.dumps({"authorization": f"Bearer {PEERS[name]}"}),
    }
    reports: list[dict[str, Any]] = []
    with anyio.fail_after(90):
        async with await anyio.open_process([node20(), str(script), url, "whoami", era], env=env) as peer:
            assert peer.stdout is not None and peer.stdin is not None
            async for line in TextReceiveStream(peer.stdout):
                for text in line.splitlines():
                    report = json.loads(text)
                    reports.append(report)
                    if "asked" in report:
                        opened = functools.partial(sign_in, report["url"], name, callback_base=callback_base)
                        page = await anyio.to_thread.run_sync(opened)
                        assert page.status_code == 200 and "Signed in" in page.text, page.text
                        await peer.stdin.send(b"signed in\n")
            code = await peer.wait()
            assert peer.stderr is not None
            errors = (await peer.stderr.receive(65536)).decode(errors="replace") if code else ""
    assert code == 0, (reports, errors)
    return {"asked": reports[0], **reports[-1]}


def assert_retried_after_sign_in(report: dict[str, Any], base: str, era: str, name: str, version: str) -> None:
    """`ts_peer_signs_in`'s report: asked by URL as `era` asks (2025-11-25: URLElicitationRequiredError, the call
    cannot wait; 2026-07-28: an InputRequiredResult, fulfilled by the SDK's own driver), and the retried call ran
    with `name`'s own grant."""
    asked = report["asked"]
    if era == "legacy":
        assert (asked["asked"], asked["code"], asked["mode"]) == ("error", -32042, "url")
    else:
        assert (asked["asked"], asked["mode"]) == ("elicitation", "url")
    assert asked["url"].startswith(f"{base}/v1/oauth/sign-in?ticket=")
    assert report["protocolVersion"] == version
    assert report["result"]["isError"] is False
    assert report["result"]["content"][0]["text"] == name


async def session_turn(base: str, name: str, message: str, session: dict[str, str] | None = None) -> dict[str, Any]:
    """One turn of the session API (deterministic runner) as `name`: a new session, or a follow-up of
    `session` (updated with the rotated token). Its closing event (`turn.completed` or `turn.failed`)."""
    headers = {"authorization": f"Bearer {PEERS[name]}"}
    async with httpx2.AsyncClient(base_url=base, timeout=60, headers=headers) as http:
        with anyio.fail_after(60):
            start = 0
            if session is None:
                answer = await http.post("/v1/session", json={"message": message})
            else:
                events = await http.get(f"/v1/session/{session['sessionId']}/events", params={"format": "json"})
                start = len(events.json()["events"])
                body = {"message": message, "continuationToken": session["continuationToken"]}
                answer = await http.post(f"/v1/session/{session['sessionId']}", json=body)
            assert answer.status_code == 200, answer.text
            handle = answer.json()
            if session is not None:
                session["continuationToken"] = handle["continuationToken"]
            stream = http.stream("GET", f"/v1/session/{handle['sessionId']}/stream", params={"startIndex": start})
            async with stream as lines:
                async for line in lines.aiter_lines():
                    event = json.loads(line) if line.strip() else {}
                    if event.get("type") in ("turn.completed", "turn.failed"):
                        return {**event, "session": {k: handle[k] for k in ("sessionId", "continuationToken")}}
    raise AssertionError("the session stream ended without a closing turn event")
