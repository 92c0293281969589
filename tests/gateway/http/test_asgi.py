"""In-process checks of the ASGI pieces every route shares (the real-server tests are in
test_hardening.py, test_connection_limits.py and test_behind_proxy.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message

from connections import load_project
from gateway.app import create_app
from gateway.auth.chain import RequestGuard
from gateway.http._asgi import JsonRefused, host_of, loads_bounded, loads_stored
from gateway.http.proxies import PROXIED_BY, TrustedProxies
from gateway.settings import ServeSettings


@pytest.mark.parametrize(
    ("raw", "refusal"),
    [
        (b"[" * 10_000 + b"]" * 10_000, "deeper than 100"),
        (b'{"a":' * 101 + b"1" + b"}" * 101, "deeper than 100"),
        (b'"\\ud800"', "unpaired surrogate"),
        (b'{"\\udfff": 1}', "unpaired surrogate"),
        (b'["\\ude00\\ud83d"]', "unpaired surrogate"),  # the wrong order is two lone halves
        (b"\xff", "not valid UTF-8"),
        (b"{", "not valid JSON"),
    ],
)
def test_the_bounded_reader_refuses_with_a_sentence(raw: bytes, refusal: str) -> None:
    with pytest.raises(JsonRefused, match=refusal):
        loads_bounded(raw)


def test_the_bounded_reader_takes_what_is_fine() -> None:
    assert loads_bounded(b"[" * 100 + b"]" * 100) is not None
    assert loads_bounded(b'["[[[[[[", "\\\\ud800"]') == ["[[[[[[", "\\ud800"]  # brackets and escapes in strings
    assert loads_bounded(b'"\\ud83d\\ude00"') == "\U0001f600"
    assert loads_stored(b'{"t": "a\\ud800b"}') == {"t": "a?b"}


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("127.0.0.1:3000", ("127.0.0.1", 3000)),
        ("[::1]:3000", ("::1", 3000)),
        ("localhost", ("localhost", None)),
        ("127.0.0.1:3000@evil.example", None),
        ("localhost:evil", None),
        ("evil.example:80:80", None),
        ("::1", None),
        ("a b", None),
        ("x:70000", None),
    ],
)
def test_host_parsing_is_strict(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert host_of(value) == parsed


@pytest.mark.parametrize(
    ("headers", "client"),
    [
        ([(b"x-forwarded-for", b"203.0.113.7, 198.51.100.2")], "198.51.100.2"),
        ([(b"x-forwarded-for", b"198.51.100.2, 10.0.0.5")], "198.51.100.2"),  # 10.0.0.5: another trusted hop
        ([(b"forwarded", b'for="[2001:db8::1]:4711";proto=https, for=10.0.0.5')], "2001:db8::1"),
        ([(b"x-forwarded-for", b"unknown")], "10.0.0.9"),  # unreadable: the proxy's address stays
        ([], "10.0.0.9"),
    ],
)
def test_a_trusted_proxy_names_the_rightmost_untrusted_hop(headers: list[tuple[bytes, bytes]], client: str) -> None:
    scope: dict[str, Any] = {"type": "http", "client": ("10.0.0.9", 5555), "headers": headers}
    TrustedProxies(["10.0.0.0/8"]).rewrite(scope)
    assert scope["client"][0] == client
    assert scope["extensions"][PROXIED_BY] == "10.0.0.9"


def test_an_untrusted_peer_names_no_one() -> None:
    scope: dict[str, Any] = {
        "type": "http",
        "client": ("192.0.2.1", 5555),
        "headers": [(b"x-forwarded-for", b"1.2.3.4")],
    }
    TrustedProxies(["10.0.0.0/8"]).rewrite(scope)
    assert scope["client"] == ("192.0.2.1", 5555) and "extensions" not in scope


@pytest.mark.anyio
async def test_a_websocket_scope_is_refused_before_any_route() -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "websocket.connect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "websocket", "path": "/v1/mcp", "headers": [(b"host", b"127.0.0.1")], "client": ("127.0.0.1", 1)}
    await RequestGuard(app)(scope, receive, send)
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008, "reason": "no WebSocket route"}]


@pytest.mark.anyio
async def test_the_account_bridge_reads_with_the_bounded_reader(tmp_path: Path) -> None:
    """The bridge's secret reaches only stdio children, so this drives the app in process (its
    lifespan as uvicorn drives it) with the secret from the app's own state."""
    hosts = tmp_path / "project" / "agent" / "host-connections"
    hosts.mkdir(parents=True)
    (hosts / "team.py").write_text(
        "from connections import define_connection\n\nconnection = define_connection(account=True)\n"
    )
    app = create_app(load_project(tmp_path / "project"), ServeSettings(state_root=tmp_path / "state"))
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)

    async def post(body: bytes, secret: str) -> tuple[int, dict[str, Any]]:
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        headers = {
            "host": "127.0.0.1:3000", "content-type": "application/json", "content-length": str(len(body)),
            "accept": "application/json, text/event-stream", "authorization": f"Bearer {secret}",
        }  # fmt: skip
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/account/team/mcp", "raw_path": b"/v1/account/team/mcp", "root_path": "",
            "query_string": b"", "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 3000), "state": dict(state),
        }  # fmt: skip
        await app(scope, receive, send)
        return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}, app_inbox.receive,
                      app_outbox.send)  # fmt: skip
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            secret = state["accounts"].bridge.secret.reveal()
            wrong = await post(b"[]", "not-the-secret")
            deep = await post(b"[" * 10_000 + b"]" * 10_000, secret)
            lone = await post(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list"}', secret)
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"
    assert wrong[0] == 401  # the secret is checked first; what follows is past it
    assert deep[0] == 400 and deep[1]["error"]["code"] == -32700 and "deeper than" in deep[1]["error"]["message"]
    assert lone[0] == 400 and "unpaired surrogate" in lone[1]["error"]["message"]


@pytest.mark.parametrize(
    ("host", "origin", "admitted"),
    [
        ("127.0.0.1:3000", "http://127.0.0.1:3000", True),
        ("127.0.0.1:3000", "http://localhost:3000", True),
        ("127.0.0.1:3000", "http://localhost:8080", False),
        ("127.0.0.1:3000", "null", False),
        ("hub.example", "https://hub.example", True),  # behind a TLS proxy passing the Host on
        ("hub.example", "https://hub.example:8443", False),
        ("hub.example", "https://evil.example", False),
        ("127.0.0.1:3000", "ftp://127.0.0.1:3000", False),
    ],
)
@pytest.mark.anyio
async def test_an_origin_must_be_this_servers_own(host: str, origin: str, admitted: bool) -> None:
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    headers = [(b"host", host.encode()), (b"origin", origin.encode())]
    scope = {"type": "http", "method": "GET", "path": "/v1/tools", "headers": headers, "scheme": "http"}
    await RequestGuard(app)(scope, None, send)  # type: ignore[arg-type]
    assert (reached == ["/v1/tools"]) is admitted
    assert admitted or sent[0]["status"] == 403
