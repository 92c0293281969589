"""Property-based fuzzing of a real `agent-sdk serve --hub` (hypothesis, fixed seed): every route and
both MCP endpoints, the hub's and the bridge's, with JSON, JSON-RPC and raw bodies (deep nesting,
unpaired surrogates, wrong types, odd headers). Never a 5xx, never a traceback in the log, healthy
at the end; plus raw-socket cases (chunked bodies, duplicate headers, bad UTF-8, oversized bodies).

    AGENT_SDK_FUZZ_REQUESTS=10000 .venv/bin/pytest -qs --timeout=1200 tests/gateway/http/test_fuzz.py -k fuzzed

runs the long form (docs/http-api.md, "Hardening"); the suite runs 2,000 requests.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from tests.gateway.http.test_hardening import hub_gateway

from ..conftest import Served

REQUESTS = int(os.environ.get("AGENT_SDK_FUZZ_REQUESTS", "2000"))
SESSION = "ses_0123456789abcdef01234567"


@dataclass
class Target:
    served: Served
    hub_key: str
    sessions: list[str]
    statuses: dict[int, int] = field(default_factory=dict[int, int])


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # A body that never ends is cut after 3 s (the raw-socket cases send some).
    with hub_gateway(tmp_path_factory.mktemp("fuzz"), "--timeout-body", "3") as gateway:
        with gateway.served.client() as http:
            sid = http.post("/v1/session", json={"message": "hello"}).json()["sessionId"]
        yield Target(gateway.served, gateway.hub_key, [sid])


# -- what to send ---------------------------------------------------------------------------------------

_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            "\ud800",
            "a\udfffb",
            "\x00\x1b[31m\n",
            "\u202e",
            "call lookup {}",
            "call explode {}",
            'call echo {"message": 1}',
            "fail now",
            "😀",
        ]
    ),
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=12,
)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def _rpc(draw: st.DrawFn) -> str:
    method = draw(st.sampled_from(["tools/call", "tools/list", "initialize", "ping", "resources/list", "nope"]) | _text)
    name = draw(st.sampled_from(["echo", "get-sum", "lookup", "bump", "explode", "ask", "check", "call_tool"]) | _text)
    arguments = draw(st.one_of(_json, st.dictionaries(st.sampled_from(["message", "a", "b", "key", "name"]), _json)))
    params: Any = draw(st.one_of(st.just({"name": name, "arguments": arguments}), _json))
    body: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2])), "method": method, "params": params}
    ident = draw(st.one_of(st.integers(), _text, st.none(), st.just({"a": 1})))
    if draw(st.booleans()):
        body["id"] = ident
    text = json.dumps(body)
    if draw(st.integers(0, 9)) == 0:  # deep arguments, as text: json.dumps would refuse them too
        text = text.replace(
            '"params": ', '"params": {"name": "echo", "arguments": {"a": ' + _deep(1000) + '}}, "x": ', 1
        )
    return text


@st.composite
def _body(draw: st.DrawFn) -> str | bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return _deep(draw(st.sampled_from([99, 101, 2000, 10_000])))
    if kind == 1:
        return draw(st.binary(max_size=64))
    if kind == 2:
        return draw(_rpc())
    fields = st.fixed_dictionaries(
        {},
        optional={
            "message": _json, "title": _json, "purpose": _json, "input": _json,
            "sessionId": _json, "continuationToken": _json, "waitMs": _json,
        },
    )  # fmt: skip
    return json.dumps(draw(st.one_of(fields, _json)))


@st.composite
def _request(draw: st.DrawFn, target: Target) -> tuple[str, str, dict[str, str], str | bytes | None]:
    sid = draw(st.sampled_from([*target.sessions, SESSION, "ses_x", "../../etc"]) | _text)
    sid = quote(sid.encode("utf-8", "surrogatepass"), safe="")  # a lone surrogate goes out as %ED%A0%80
    tool = draw(st.sampled_from(["lookup", "bump", "explode", "echo", "get-sum", "nope"]))
    routes = [
        ("POST", "/v1/mcp"), ("POST", "/v1/mcp/tools"), ("GET", "/v1/mcp"), ("DELETE", "/v1/mcp/tools"),
        ("GET", "/v1/tools"), ("GET", f"/v1/tools/{tool}"), ("POST", f"/v1/tools/{tool}"),
        ("POST", "/v1/session"), ("POST", f"/v1/session/{sid}"), ("GET", f"/v1/session/{sid}"),
        ("POST", f"/v1/session/{sid}/stop"), ("GET", f"/v1/session/{sid}/events"),
        ("GET", f"/v1/session/{sid}/events?format=" + draw(st.sampled_from(["json", "x", ""]))),
        ("GET", f"/v1/session/{sid}/stream?startIndex=" + draw(st.sampled_from(["0", "-1", "x", "99999999999"]))),
        ("GET", "/v1/sessions"), ("GET", "/v1/info"), ("GET", "/v1/health"), ("PUT", "/v1/session"),
        ("GET", "/v1/hub/connectors"), ("POST", "/v1/hub/connectors/everything/mcp"),
        ("POST", f"/v1/hub/connectors/{tool}/mcp"), ("POST", "/v1/account/everything/mcp"),
    ]  # fmt: skip
    method, path = draw(st.sampled_from(routes))
    headers: dict[str, str] = {}
    if draw(st.integers(0, 5)) == 0:
        headers["content-type"] = draw(st.sampled_from(["text/plain", "application/x+json", "x", ""]))
    else:
        headers["content-type"] = "application/json"
    if path.endswith("/mcp") or path.startswith("/v1/mcp"):
        headers["accept"] = draw(st.sampled_from(["application/json, text/event-stream", "text/html", "*/*"]))
        headers["mcp-protocol-version"] = draw(st.sampled_from(["2025-11-25", "2026-07-28", "1999-01-01"]))
    if path.startswith("/v1/hub/") and draw(st.integers(0, 3)):
        headers["authorization"] = f"Bearer {target.hub_key}"
    if draw(st.integers(0, 9)) == 0:
        headers["origin"] = draw(
            st.sampled_from(["null", "http://evil.example", "http://localhost:1", target.served.url])
        )
    body = draw(_body()) if method in ("POST", "PUT") else None
    return method, path, headers, body


def test_fuzzed_requests_never_get_a_5xx(target: Target) -> None:
    served = target.served
    start = _rss_kb(served.proc.pid)
    rss: list[int] = []

    with served.client() as http:

        @seed(20261201)
        @settings(
            max_examples=REQUESTS,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.data())
        def one(data: st.DataObject) -> None:
            method, path, headers, body = data.draw(_request(target))
            with http.stream(method, path, headers=headers, content=body) as answer:
                status = answer.status_code
                if not path.split("?")[0].endswith("/stream"):
                    answer.read()
            target.statuses[status] = target.statuses.get(status, 0) + 1
            assert status < 500, (method, path, headers, str(body)[:300], status)
            if sum(target.statuses.values()) == min(200, REQUESTS // 2):
                rss.append(_rss_kb(served.proc.pid))  # after the warm-up: every module imported, every pool open

        one()
        rss.append(_rss_kb(served.proc.pid))
        assert http.get("/v1/health").status_code == 200
    log = served.log_text()
    print(f"\nfuzz: {sum(target.statuses.values())} requests, statuses {dict(sorted(target.statuses.items()))}, "
          f"RSS before {start // 1024} MB, after warm-up {rss[0] // 1024} MB, at the end {rss[-1] // 1024} MB; "
          f"tracebacks in the log: {log.count('Traceback')}")  # fmt: skip
    assert "Traceback" not in log and "internal_error" not in log
    assert rss[-1] <= rss[0] * 1.2, rss


def _raw(served: Served, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", served.port), timeout=20) as sock:
        sock.sendall(request)
        chunks: list[bytes] = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
    return b"".join(chunks)


_HEAD = b"POST /v1/tools/lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
_MCP = (
    b"POST /v1/mcp/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n"
)


@pytest.mark.parametrize(
    "request_bytes",
    [
        _HEAD + b'Transfer-Encoding: chunked\r\n\r\n5\r\n{"inp\r\n9\r\nut": {}}\r\n0\r\n\r\n',
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n{}\r\n0\r\n\r\n",
        _HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        _HEAD + b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}",
        _HEAD + b"Content-Length: -1\r\n\r\n{}",
        _HEAD + b"Content-Length: 99999999999999\r\n\r\n{}",
        _HEAD + b"Content-Length: 6\r\n\r\n\xff\xfe\xfd{}\x80",
        _MCP + b'Content-Length: 28\r\n\r\n{"jsonrpc":"2.0","id":"\xed\xa0\x80"}',  # UTF-8 of a surrogate
        b"GET /v1/tools/\xff\xfe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        b"GET /v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: \xff\xfe\x80\r\nConnection: close\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        b"GET /v1/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1\r\nOrigin: null\r\n"
        b"Connection: close\r\n\r\n",
        b"GET /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,  # a TLS hello to a plain-HTTP port
    ],
)
def test_raw_socket_cases_never_get_a_5xx(target: Target, request_bytes: bytes) -> None:
    answer = _raw(target.served, request_bytes)
    assert not answer.startswith(b"HTTP/1.1 5"), answer[:300]
    assert b"Traceback" not in answer


def test_an_oversized_body_is_413_on_every_body_route(target: Target) -> None:
    big = b"[" + b"1," * (2 * 1024 * 1024) + b"1]"  # 4 MiB + 3 bytes
    hub = {"Authorization": f"Bearer {target.hub_key}"}
    mcp = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
    with target.served.client() as http:
        for path, extra in (
            ("/v1/session", {}),
            ("/v1/tools/lookup", {}),
            ("/v1/mcp", mcp),
            ("/v1/mcp/tools", mcp),
            ("/v1/hub/connectors/everything/mcp", {**mcp, **hub}),
        ):
            answer = http.post(path, content=big, headers={"content-type": "application/json", **extra})
            assert answer.status_code == 413, (path, answer.status_code, answer.text[:200])
