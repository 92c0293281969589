"""Connection limits of a real `agent-sdk serve`, set short by flags: idle, slowloris and slow-body
connections are closed within their timeouts, an oversized head is 431 without the server's memory
growing by its size, and connections past the cap are turned away."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import BASIC, Served, assert_clean, serve

IDLE, HEADER, BODY = 1.0, 1.0, 1.0
SLACK = 4.0  # a loaded box: closed well before this, or the timeout is not enforced
MAX_HEAD = 16 * 1024
MAX_CONNECTIONS = 20
OPERATOR_TOKEN = "operator-token-for-the-limits-hub"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("limits")
    served = serve(
        BASIC, root / "state", "--hub",
        "--timeout-keep-alive", str(IDLE), "--timeout-header", str(HEADER), "--timeout-body", str(BODY),
        "--max-header-bytes", str(MAX_HEAD), "--max-connections", str(MAX_CONNECTIONS),
        env={"AGENT_SDK_BEARER_TOKEN": OPERATOR_TOKEN},  # a hub never trusts loopback
    )  # fmt: skip
    served.headers["Authorization"] = f"Bearer {OPERATOR_TOKEN}"
    yield served
    served.stop()
    assert_clean(served.log_text())


def _connect(served: Served) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=IDLE + SLACK)
    return sock


def _closed_by_server(sock: socket.socket, deadline: float, trickle: bytes = b"") -> bool:
    """Read (sending `trickle` a byte every 0.2 s meanwhile) until EOF; whether it came before `deadline`."""
    sock.settimeout(0.2)
    sent = 0
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            pass
        except ConnectionResetError:
            return True
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent : sent + 1])
            except (BrokenPipeError, ConnectionResetError):
                return True
            sent += 1
    return False


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_connection_that_never_sends_is_closed_after_the_idle_timeout(limited: Served) -> None:
    with _connect(limited) as sock:
        assert _closed_by_server(sock, time.monotonic() + IDLE + SLACK)


def test_an_idle_keep_alive_connection_is_closed_after_its_request(limited: Served) -> None:
    with _connect(limited) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        assert _closed_by_server(sock, time.monotonic() + IDLE + SLACK)


def test_a_slowloris_head_is_closed_after_the_header_timeout(limited: Served) -> None:
    # A byte every 0.2 s keeps the connection from ever being idle; the head never completes.
    head = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    with _connect(limited) as sock:
        assert _closed_by_server(sock, time.monotonic() + HEADER + SLACK, trickle=head)


def test_a_slow_body_is_closed_after_the_body_timeout(limited: Served) -> None:
    head = b"POST /v1/tools/lookup HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    with _connect(limited) as sock:
        sock.sendall(head + b"Content-Length: 400\r\n\r\n")
        assert _closed_by_server(sock, time.monotonic() + BODY + SLACK, trickle=b'{"input": {}}' + b" " * 300)


@pytest.mark.parametrize("path", ["/v1/tools", "/v1/hub/connectors", "/v1/health"])
def test_a_100_mb_header_is_431_and_the_memory_stays_flat(limited: Served, path: str) -> None:
    before = _rss_kb(limited.proc.pid)
    with _connect(limited) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".encode())
        chunk = b"a" * (1024 * 1024)
        answer = b""
        for _ in range(100):  # 100 MB, unless the server stops reading first
            try:
                sock.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
        sock.settimeout(5)
        try:
            answer = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            pass
    after = _rss_kb(limited.proc.pid)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert after - before < 20 * 1024, (before, after)  # kB: far below the 100 MB sent


def test_connections_past_the_cap_are_turned_away(limited: Served) -> None:
    held = [_connect(limited) for _ in range(MAX_CONNECTIONS)]
    try:
        with _connect(limited) as extra:
            extra.settimeout(5)
            answer = extra.recv(65536)
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
    finally:
        for sock in held:
            sock.close()
    # The cap frees up as connections close.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with _connect(limited) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            if sock.recv(65536).startswith(b"HTTP/1.1 200"):
                return
        time.sleep(0.1)
    pytest.fail("the server kept refusing connections after the held ones closed")


def test_info_reports_the_limits_the_flags_set(limited: Served) -> None:
    with limited.client() as http:
        runtime = http.get("/v1/info").json()["runtime"]
    assert runtime["connections"] == {
        "idleTimeoutS": IDLE,
        "headerTimeoutS": HEADER,
        "bodyTimeoutS": BODY,
        "maxHeaderBytes": MAX_HEAD,
        "maxConnections": MAX_CONNECTIONS,
        "trustedProxies": 0,
    }
