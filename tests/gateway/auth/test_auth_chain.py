"""Attacks that must fail, through real HTTP: forwarded headers, DNS rebinding, foreign origins,
wrong bearer tokens, another principal's session, oversized bodies."""

from __future__ import annotations

import hmac
import socket
from collections.abc import Iterator

import httpx2
import pytest
from pydantic import SecretStr

from gateway.auth.chain import AuthChain

from ..conftest import BASIC, Served, assert_clean, serve

TOKEN_A = "token-a-0123456789abcdef"
TOKEN_B = "token-b-0123456789abcdef"


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("strict")
    served = serve(BASIC, root / "state")
    yield served
    served.stop()
    assert_clean(served.log_text())


@pytest.fixture(scope="module")
def bearer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("bearer")
    # One token by flag, one by environment: two principals.
    served = serve(BASIC, root / "state", "--bearer-token", TOKEN_B, env={"AGENT_SDK_BEARER_TOKEN": "ignored-by-flag"})
    yield served
    served.stop()
    log = served.log_text()
    assert_clean(log, secrets=[TOKEN_A, TOKEN_B])


@pytest.fixture(scope="module")
def two_tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("two")
    served = serve(BASIC, root / "state", "--bearer-token", TOKEN_A, "--bearer-token", TOKEN_B)
    yield served
    served.stop()
    assert_clean(served.log_text(), secrets=[TOKEN_A, TOKEN_B])


@pytest.mark.parametrize(
    "header",
    [
        ("Forwarded", "for=203.0.113.9"),
        ("X-Forwarded-For", "203.0.113.9"),
        ("X-Forwarded-Host", "example.com"),
        ("X-Forwarded-Proto", "https"),
        ("X-Real-IP", "203.0.113.9"),
    ],
)
def test_a_forwarded_request_on_loopback_is_401(strict: Served, header: tuple[str, str]) -> None:
    with strict.client() as http:
        for path, method in (("/v1/tools", "GET"), ("/v1/mcp/tools", "POST"), ("/v1/session", "POST")):
            response = http.request(method, path, headers=dict([header]), json={})
            assert response.status_code == 401, path
            assert_clean(response.text)


def test_a_rebinding_host_is_421(strict: Served) -> None:
    with strict.client() as http:
        for host in ("evil.example", "evil.example:80", "127.0.0.1.nip.io", "10.0.0.1"):
            response = http.get("/v1/tools", headers={"Host": host})
            assert response.status_code == 421, host
        mcp = http.post("/v1/mcp", headers={"Host": "attacker.test"}, json={})
    assert mcp.status_code == 421
    assert mcp.json()["error"]["code"] == -32600  # MCP routes answer in JSON-RPC


def test_loopback_hosts_are_admitted(strict: Served) -> None:
    with strict.client() as http:
        for host in (f"127.0.0.1:{strict.port}", f"localhost:{strict.port}", "localhost", "[::1]:80"):
            assert http.get("/v1/tools", headers={"Host": host}).status_code == 200, host


def test_a_foreign_origin_is_403(strict: Served) -> None:
    with strict.client() as http:
        for origin in ("http://evil.example", "https://evil.example:3000", "null", "file://"):
            response = http.get("/v1/tools", headers={"Origin": origin})
            assert response.status_code == 403, origin
            assert response.json()["error"] == "forbidden_origin"
        same = http.get("/v1/tools", headers={"Origin": f"http://localhost:{strict.port}"})
    assert same.status_code == 200


def test_bearer_mode_refuses_missing_and_wrong_tokens(bearer: Served) -> None:
    with bearer.client() as http:
        missing = http.get("/v1/tools")
        wrong = http.get("/v1/tools", headers={"Authorization": f"Bearer {TOKEN_A}"})
        env_token = http.get("/v1/tools", headers={"Authorization": "Bearer ignored-by-flag"})
        scheme = http.get("/v1/tools", headers={"Authorization": f"Basic {TOKEN_B}"})
        right = http.get("/v1/tools", headers={"Authorization": f"Bearer {TOKEN_B}"})
        mcp = http.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    for response in (missing, wrong, env_token, scheme):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN_B not in response.text
    assert mcp.status_code == 401
    assert right.status_code == 200


def test_another_principals_session_is_403(two_tokens: Served) -> None:
    a = {"Authorization": f"Bearer {TOKEN_A}"}
    b = {"Authorization": f"Bearer {TOKEN_B}"}
    with two_tokens.client() as http:
        created = http.post("/v1/session", json={"message": "hello"}, headers=a).json()
        sid, token = created["sessionId"], created["continuationToken"]
        attempts = [
            http.post(f"/v1/session/{sid}", json={"message": "mine now", "continuationToken": token}, headers=b),
            http.get(f"/v1/session/{sid}/events", headers=b),
            http.get(f"/v1/session/{sid}/stream", headers=b),
            http.post(f"/v1/session/{sid}/stop", headers=b),
            http.post("/v1/tools/lookup", json={"input": {"key": "k"}, "sessionId": sid}, headers=b),
            http.post("/v1/tools/lookup", json={"input": {"key": "k"}, "continuationToken": token}, headers=b),
        ]
        own_list_b = http.get("/v1/sessions", headers=b).json()["sessions"]
        own_list_a = http.get("/v1/sessions", headers=a).json()["sessions"]
    for response in attempts:
        assert response.status_code == 403, response.request.url
        assert response.json()["error"] == "forbidden"
    assert sid not in {s["sessionId"] for s in own_list_b}
    assert sid in {s["sessionId"] for s in own_list_a}


def _raw_request(port: int, head: bytes, body_prefix: bytes) -> bytes:
    """Send a request head and part of its body, then read whatever the server answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body_prefix)
        chunks: list[bytes] = []
        while True:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in chunks[-1]:
                break
        return b"".join(chunks)


@pytest.mark.parametrize("path", ["/v1/tools/lookup", "/v1/mcp/tools", "/v1/mcp", "/v1/session"])
def test_a_50_mb_body_is_413_before_it_is_read(strict: Served, path: str) -> None:
    size = 50 * 1024 * 1024
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{strict.port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {size}\r\n\r\n"
    ).encode()
    answer = _raw_request(strict.port, head, b'{"input": "' + b"x" * 65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"Traceback" not in answer


def test_a_chunked_body_over_the_cap_is_413(strict: Served) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(80):  # 80 x 64 KiB = 5 MiB, over the default 4 MiB cap
            yield b"x" * 65536

    with strict.client() as http:
        response = http.post("/v1/tools/lookup", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"


@pytest.mark.anyio
async def test_every_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain compares the presented token with every configured one through `hmac.compare_digest`
    (no early exit, no `==`), so response timing says nothing about which token nearly matched."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)

    async def ok(scope: object, receive: object, send: object) -> None:
        from starlette.responses import PlainTextResponse

        await PlainTextResponse("ok")(scope, receive, send)  # type: ignore[arg-type]

    chain = AuthChain(ok, mode="bearer", bearer_tokens=[SecretStr(TOKEN_A), SecretStr(TOKEN_B)])
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=chain), base_url="http://127.0.0.1") as http:
        first = await http.get("/", headers={"Authorization": f"Bearer {TOKEN_A}"})
        wrong = await http.get("/", headers={"Authorization": "Bearer token-a-0123456789abcdeX"})
    assert first.status_code == 200 and wrong.status_code == 401
    assert len(calls) == 4  # two tokens, each compared for both requests
    assert all(len(a) == len(b) == 32 for a, b in calls)  # digests: equal lengths, so no length leak either
