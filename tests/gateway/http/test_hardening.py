"""Attacks from the hardening run (#18), through a real `agent-sdk serve --hub`: deep JSON and
unpaired surrogates on every route, a poisoned session store, cross-site requests, loose and
duplicate `Host` headers, forged log lines."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.peers import node_bin

from ..conftest import ROOT, Served, assert_clean, make_project, serve

DEEP_BODY = "[" * 10_000 + "]" * 10_000
DEEP_ARGS = '{"value": ' + "[" * 1000 + "]" * 1000 + "}"  # as text: this process cannot encode it either
SURROGATE = '"\\ud800"'  # a JSON string escape for an unpaired surrogate


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return subprocess.run(
        [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args],
        env={**inherited, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


@dataclass
class Gateway:
    served: Served
    hub_key: str


OPERATOR_TOKEN = "operator-token-for-the-hardening-hub"


def _write_poisoned_session(state_root: Path) -> None:
    """A record stored before the boundary refused unpaired surrogates (as the fuzz run left one)."""
    sessions = state_root / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    owner = "bearer:" + hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest()[:12]  # the operator's principal
    record = (
        '{"id": "ses_0123456789abcdef01234567", "owner": "' + owner + '", "continuation_token": "http:abc", '
        '"created_at": "2026-01-01T00:00:00+00:00", "title": "bad \\ud800 title"}'
    )
    (sessions / "ses_0123456789abcdef01234567.json").write_text(record)
    (state_root / "traces").mkdir(exist_ok=True)
    event = (
        '{"type": "session.started", "index": 0, "sessionId": "ses_0123456789abcdef01234567", "data": {"t": "\\udfff"}}'
    )
    (state_root / "traces" / "ses_0123456789abcdef01234567.ndjson").write_text(event + "\n")


@contextmanager
def hub_gateway(root: Path, *flags: str, poisoned: bool = False) -> Iterator[Gateway]:
    """`agent-sdk serve --hub` on a project with the authored tools and server-everything over stdio
    (advertised, linkable), with one hub key for every connector; its log is checked clean after."""
    everything = str(node_bin("mcp-server-everything"))
    connection = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={everything!r}, args=['stdio'], advertise_tools=True, linkable=True)\n"
    )
    project = make_project(root / "project", {"everything": connection})
    state_root = root / "state"
    if poisoned:
        _write_poisoned_session(state_root)
    done = _cli("hub", "keys", "create", "--dir", str(project), "--state-root", str(state_root), "--account", "a",
                "--all", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # A hub never trusts loopback: it serves with the operator's bearer token, which the test client sends.
    served = serve(project, state_root, "--hub", *flags, env={"AGENT_SDK_BEARER_TOKEN": OPERATOR_TOKEN})
    served.headers["Authorization"] = f"Bearer {OPERATOR_TOKEN}"
    try:
        yield Gateway(served, json.loads(done.stdout)["key"])
    finally:
        served.stop()
    assert_clean(served.log_text())


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    with hub_gateway(tmp_path_factory.mktemp("hardening"), poisoned=True) as gateway:
        yield gateway


def _rpc_text(method: str, params: str) -> str:
    return '{"jsonrpc": "2.0", "id": 1, "method": "' + method + '", "params": ' + params + "}"


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def test_deep_json_is_a_4xx_in_the_routes_own_shape_on_every_route(gw: Gateway) -> None:
    hub = {"Authorization": f"Bearer {gw.hub_key}"}
    json_headers = {"content-type": "application/json"}
    with gw.served.client() as http:
        sid = http.post("/v1/session", json={"message": "hello"}).json()["sessionId"]
        for path, extra in (
            ("/v1/mcp", MCP_HEADERS),
            ("/v1/mcp/tools", MCP_HEADERS),
            ("/v1/hub/connectors/everything/mcp", {**MCP_HEADERS, **hub}),
        ):
            for body in (DEEP_BODY, "[" * 100_000):  # the hub run's 100k `[` (unclosed) too
                answer = http.post(path, content=body, headers={**extra, **json_headers})
                assert answer.status_code == 400, (path, answer.text)
                assert answer.json()["error"]["code"] == -32700 and "deeper than" in answer.json()["error"]["message"]
        for path in ("/v1/session", f"/v1/session/{sid}", "/v1/tools/lookup"):
            answer = http.post(path, content=DEEP_BODY, headers=json_headers)
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json()["error"] == "invalid_request" and "deeper than" in answer.json()["message"]
        # 1,000 levels inside tool arguments, on each way to call a tool.
        calls = (
            ("/v1/tools/lookup", '{"input": ' + DEEP_ARGS + "}", {}),
            ("/v1/mcp/tools", _rpc_text("tools/call", '{"name": "echo", "arguments": ' + DEEP_ARGS + "}"), MCP_HEADERS),
            ("/v1/mcp", _rpc_text("tools/call", '{"name": "call_tool", "arguments": {"name": "echo", "input": '
             + DEEP_ARGS + "}}"), MCP_HEADERS),
            ("/v1/hub/connectors/everything/mcp", _rpc_text("tools/call", '{"name": "echo", "arguments": '
             + DEEP_ARGS + "}"), {**MCP_HEADERS, **hub}),
        )  # fmt: skip
        for path, body, extra in calls:
            answer = http.post(path, content=body, headers={**extra, **json_headers})
            assert answer.status_code == 400, (path, answer.text)
        assert http.get("/v1/health").status_code == 200


def test_unpaired_surrogates_are_refused_at_the_boundary(gw: Gateway) -> None:
    json_headers = {"content-type": "application/json"}
    with gw.served.client() as http:
        bodies = (
            ("/v1/mcp/tools", '{"jsonrpc": "2.0", "id": ' + SURROGATE + ', "method": "tools/list"}'),
            ("/v1/mcp/tools", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
             + SURROGATE + ', "arguments": {}}}'),
            ("/v1/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask", '
             '"arguments": {"message": ' + SURROGATE + "}}}"),
        )  # fmt: skip
        for path, body in bodies:
            answer = http.post(path, content=body, headers={**MCP_HEADERS, **json_headers})
            assert answer.status_code == 400 and "unpaired surrogate" in answer.text, (path, answer.text)
        for path, body in (
            ("/v1/session", '{"message": "hi", "title": ' + SURROGATE + "}"),
            ("/v1/session", '{"message": ' + SURROGATE + "}"),
            ("/v1/tools/lookup", '{"input": {"key": ' + SURROGATE + "}}"),
        ):
            answer = http.post(path, content=body, headers=json_headers)
            assert answer.status_code == 400 and answer.json()["error"] == "invalid_request", (path, answer.text)
        # A pair (an emoji escaped by an ASCII-only encoder) is fine.
        paired = http.post("/v1/session", content='{"message": "hi", "title": "\\ud83d\\ude00"}', headers=json_headers)
        assert paired.status_code == 200, paired.text
        listed = http.get("/v1/sessions")
    assert listed.status_code == 200, listed.text


def test_a_store_poisoned_before_the_fix_still_lists_and_reads(gw: Gateway) -> None:
    with gw.served.client() as http:
        listed = http.get("/v1/sessions")
        events = http.get("/v1/session/ses_0123456789abcdef01234567/events?format=json")
        one = http.get("/v1/session/ses_0123456789abcdef01234567")
    assert listed.status_code == 200, listed.text
    titles = {s["sessionId"]: s.get("title") for s in listed.json()["sessions"]}
    assert titles["ses_0123456789abcdef01234567"] == "bad ? title"
    assert events.status_code == 200 and one.status_code == 200, events.text


def test_a_simple_cross_site_request_cannot_reach_a_state_changing_route(gw: Gateway) -> None:
    with gw.served.client() as http:
        for path in ("/v1/tools/bump", "/v1/session"):
            body = '{"input": {}, "message": "hi"}'
            cross = http.post(
                path, content=body, headers={"Origin": "http://localhost:8080", "content-type": "text/plain"}
            )
            assert cross.status_code == 403 and cross.json()["error"] == "forbidden_origin", cross.text
            plain = http.post(path, content=body, headers={"content-type": "text/plain"})
            assert plain.status_code == 415 and plain.json()["error"] == "unsupported_media_type", plain.text
            form = http.post(path, content="a=b", headers={"content-type": "application/x-www-form-urlencoded"})
            assert form.status_code == 415
        # Another local port is another origin, on reads too; this server's own origin is admitted.
        other = http.get("/v1/tools", headers={"Origin": "http://127.0.0.1:8080"})
        own = http.get("/v1/tools", headers={"Origin": gw.served.url})
        own_by_name = http.get("/v1/tools", headers={"Origin": f"http://localhost:{gw.served.port}"})
    assert other.status_code == 403
    assert own.status_code == 200 and own_by_name.status_code == 200


def _raw(served: Served, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        sock.sendall(request)
        chunks: list[bytes] = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    "hosts",
    [
        [b"127.0.0.1:PORT@evil.example"],
        [b"localhost:evil"],
        [b"127.0.0.1:PORT", b"evil.example"],
        [b"127.0.0.1:PORT", b"127.0.0.1:PORT"],
        [b"127.0.0.1 evil"],
    ],
)
def test_loose_and_duplicate_host_headers_are_refused(gw: Gateway, hosts: list[bytes]) -> None:
    lines = b"".join(b"Host: " + h.replace(b"PORT", str(gw.served.port).encode()) + b"\r\n" for h in hosts)
    answer = _raw(gw.served, b"GET /v1/tools HTTP/1.1\r\n" + lines + b"Connection: close\r\n\r\n")
    status = answer.split(b" ", 2)[1]
    assert status in (b"400", b"421"), answer[:300]
    assert b"Traceback" not in answer


def test_the_logged_path_cannot_forge_a_log_line(gw: Gateway) -> None:
    forged = b"/v1/tools%0aERROR%20agent_sdk:%20forged%1b[31m"
    answer = _raw(
        gw.served,
        b"GET " + forged + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nConnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    log = gw.served.log_text()
    assert "\nERROR agent_sdk: forged" not in log and "\x1b[31m" not in log
    assert "refused GET /v1/tools\ufffdERROR agent_sdk: forged" in log
