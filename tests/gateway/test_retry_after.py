"""What a peer gets at the gateway's limits: a 503 that says when to try again (RFC 9110 §10.2.3
`Retry-After`), found by the scale run (bench/bench_scale.py): past `--max-connections`, and while the
shared state store (a real `redis-server`) is away. The process keeps serving after both."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx2
import pytest

from .conftest import BASIC, assert_clean, serve
from .replicas import BEARER, redis_server, replica

MAX_CONNECTIONS = 8


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def test_a_connection_past_the_cap_gets_503_with_retry_after_and_the_server_keeps_serving(tmp_path: Path) -> None:
    served = serve(BASIC, tmp_path / "state", "--max-connections", str(MAX_CONNECTIONS))
    try:
        held = [_connect(served.port) for _ in range(MAX_CONNECTIONS)]
        try:
            with _connect(served.port) as extra:
                answer = extra.recv(65536)
        finally:
            for sock in held:
                sock.close()
        head = answer.split(b"\r\n\r\n", 1)[0].lower()
        assert head.startswith(b"http/1.1 503"), answer[:200]
        assert b"\r\nretry-after: 1" in head, answer[:300]
        assert b"retry shortly" in answer
        assert httpx2.get(f"{served.url}/v1/health", timeout=10).status_code == 200
        assert served.proc.poll() is None
    finally:
        served.stop()
    assert_clean(served.log_text())


@pytest.mark.peers
def test_a_state_route_while_redis_is_away_is_503_with_retry_after(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as redis:
        served = replica(BASIC, tmp_path / "r0", redis.url)
        try:
            redis.kill()
            answer = httpx2.get(
                f"{served.url}/v1/session/ses_000000000000000000000000",
                headers={"Authorization": f"Bearer {BEARER}"},
                timeout=30,
            )
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == "state_unavailable"
            assert answer.headers["retry-after"] == "1"
            redis.start()
            back = httpx2.get(f"{served.url}/v1/sessions", headers={"Authorization": f"Bearer {BEARER}"}, timeout=30)
            assert back.status_code == 200, back.text
        finally:
            served.stop()
        assert_clean(served.log_text(), [BEARER])
