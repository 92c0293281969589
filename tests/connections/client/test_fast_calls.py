"""The fast `tools/call` leg (`client/_fast_calls.py`, `client/_transports/_http1.py`) against real upstreams.

Every case runs twice, once with the fast leg (the default) and once with `fast_calls=False`
(the SDK's Streamable HTTP transport), and requires the same result or the same typed error.
Upstreams: the reference server `@modelcontextprotocol/server-everything` (Express, SSE answers,
stateful sessions, `Keep-Alive: timeout=5`), a server on the TypeScript SDK whose tools send
requests and notifications on the call's own answer stream (`fixtures/upstreams/chatty_server.mjs`),
and our recording server on the Python SDK (JSON answers, stateless); nginx in front of
server-everything for TLS and a redirect, and for an answer stream cut mid-call (a 1 s read timeout).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import pytest
from opentelemetry import baggage
from opentelemetry import context as otel_context

from connections import (
    ClientPool,
    ConnectionsError,
    ConnectionUnavailable,
    UnknownTool,
    UpstreamTimeout,
    define_connection,
)
from connections.client._clients import shared_ssl_context
from connections.client._fast_calls import fast_calls_apply
from connections.client._transports._http1 import Http1Origin
from connections.project._definitions import ConnectionDefinition
from tests.conftest import free_port
from tests.nginx import main_conf
from tests.peers import debian_bin, node20, node_bin, node_module
from tests.processes import recording_server, running

pytestmark = pytest.mark.anyio

LEGS = ("fast", "sdk")


BOTH_ERAS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "both_eras.py"
CHATTY = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "chatty_server.mjs"


def everything_cmd() -> list[str]:
    return [str(node_bin("mcp-server-everything")), "streamableHttp"]


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    port = free_port()
    with running(everything_cmd(), port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def pool_for(defn: ConnectionDefinition, leg: str) -> AsyncIterator[ClientPool]:
    async with ClientPool({defn.name: defn}, fast_calls=leg == "fast") as pool:
        yield pool


async def outcome(pool: ClientPool, name: str, tool: str, arguments: dict[str, Any]) -> Any:
    """What a caller sees: the result's wire form, or the typed error's class, code and message."""
    try:
        result = await pool.call_tool(name, tool, arguments)
    except ConnectionsError as exc:
        return (type(exc).__name__, exc.code, str(exc))
    return result


CASES: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo ✓"}),
    ("get-sum", {"a": 2, "b": 40}),
    ("get-sum", {"a": "two", "b": 40}),  # invalid arguments: the server's own error result
    ("get-structured-content", {"location": "Chicago"}),  # checked against its output schema
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-resource-links", {"count": 4}),
    ("get-tiny-image", {}),
    ("trigger-long-running-operation", {"duration": 0.3, "steps": 3}),
    ("no-such-tool", {}),
]


async def test_every_answer_equals_the_sdk_transports(everything: str) -> None:
    defn = define_connection(url=everything).named("everything", None)
    seen: dict[str, list[Any]] = {}
    listed: dict[str, list[Any]] = {}
    for leg in LEGS:
        async with pool_for(defn, leg) as pool:
            seen[leg] = [await outcome(pool, "everything", tool, args) for tool, args in CASES]
            assert pool.status("everything").fast_calls is (leg == "fast")
            tools = await pool.list_tools("everything")  # tools/list takes the fast wire too
            listed[leg] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    assert listed["fast"] == listed["sdk"] and "echo" in [t["name"] for t in listed["fast"]]
    for (tool, _), fast, sdk in zip(CASES, seen["fast"], seen["sdk"], strict=True):
        assert fast == sdk, tool
    by_tool = dict(zip((t for t, _ in CASES), seen["fast"], strict=False))
    assert by_tool["echo"]["content"] == [{"type": "text", "text": "Echo: héllo ✓"}]
    assert by_tool["get-structured-content"]["structuredContent"]["temperature"] is not None
    assert by_tool["no-such-tool"][0] == UnknownTool.__name__


@pytest.fixture(scope="module", params=["json", "sse"])
def both_eras(request: pytest.FixtureRequest) -> Iterator[str]:
    """An `mcp` 2.x stateless server speaking 2026-07-28 and the handshake, answering JSON or SSE."""
    port = free_port()
    cmd = [sys.executable, str(BOTH_ERAS), "--port", str(port), *(["--sse"] if request.param == "sse" else [])]
    with running(cmd, port=port):
        yield f"http://127.0.0.1:{port}/mcp"


BOTH_ERAS_CASES: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "héllo ✓"}),
    ("weather", {"city": "Oslo"}),  # structured content, checked against its output schema
    ("badweather", {}),  # structured content that breaks the tool's output schema: an error
    ("fails", {}),  # an isError result
    ("meta", {}),  # the result's own _meta
    ("progress", {"steps": 3}),  # progress notifications before the answer (SSE mode)
    ("routed", {"region": "eu-west"}),  # x-mcp-header: Mcp-Param-Region at 2026-07-28
    ("raises", {}),  # a JSON-RPC error
    ("no-such-tool", {}),
]


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_both_generations_answer_the_same_on_both_wires(both_eras: str, protocol: str) -> None:
    # 2026-07-28 sessions take the fast wire too: the session's stamp gives each request its `_meta`
    # envelope and `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers; the answers equal the SDK transport's.
    defn = define_connection(url=both_eras, protocol=protocol).named("eras", None)
    seen: dict[str, list[Any]] = {}
    listed: dict[str, Any] = {}
    for leg in LEGS:
        async with pool_for(defn, leg) as pool:
            tools = await pool.list_tools("eras")  # tools/list on the leg under test, and the Mcp-Param map
            listed[leg] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
            seen[leg] = [await outcome(pool, "eras", tool, args) for tool, args in BOTH_ERAS_CASES]
            status = pool.status("eras")
            assert status.fast_calls is (leg == "fast")
            assert (status.protocol_version == "2026-07-28") is (protocol == "modern")
    assert listed["fast"] == listed["sdk"] and len(listed["fast"]) == 8
    for (tool, _), fast, sdk in zip(BOTH_ERAS_CASES, seen["fast"], seen["sdk"], strict=True):
        assert fast == sdk, tool
    by_tool = dict(zip((t for t, _ in BOTH_ERAS_CASES), seen["fast"], strict=True))
    assert by_tool["echo"]["content"] == [{"type": "text", "text": "Echo: héllo ✓"}]
    assert by_tool["weather"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert by_tool["fails"]["isError"] is True
    assert by_tool["badweather"][:2] == ("UpstreamError", "upstream_error")
    assert by_tool["badweather"][2] == "connection 'eras': tools/call 'badweather' failed: RuntimeError"
    assert by_tool["meta"]["_meta"]["example.com/trace"] == "t-1"
    assert by_tool["progress"]["content"][0]["text"] == "done after 3"
    mirrored = "eu-west" if protocol == "modern" else "None"  # the header exists at 2026-07-28 only
    assert by_tool["routed"]["content"][0]["text"] == f"eu-west via {mirrored}"
    assert by_tool["raises"][:2] == ("UpstreamError", "upstream_error")
    assert "raises always refuses" in by_tool["raises"][2]
    assert by_tool["no-such-tool"][0] == UnknownTool.__name__
    if protocol == "modern":
        assert by_tool["echo"]["resultType"] == "complete"
        assert by_tool["echo"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "both-eras"


async def test_large_answers_and_the_sse_event_limit_match_the_sdk_transport(everything: str) -> None:
    # 600 kB crosses the wire's read pause (256 kB buffered); 1.1 MB passes the SDK's 1 MiB SSE event cap.
    cases = [("echo", {"message": "x" * 600_000}), ("echo", {"message": "y" * 1_100_000})]
    defn = define_connection(url=everything).named("everything", None)
    seen: dict[str, list[Any]] = {}
    for leg in LEGS:
        async with pool_for(defn, leg) as pool:
            seen[leg] = [await outcome(pool, "everything", tool, args) for tool, args in cases]
            after = await outcome(pool, "everything", "echo", {"message": "still fine"})
            assert after["content"][0]["text"] == "Echo: still fine"
    assert seen["fast"] == seen["sdk"]
    large, too_large = seen["fast"]
    assert large["content"][0]["text"] == "Echo: " + "x" * 600_000
    assert too_large == (
        "ResultTooLarge",
        "result_too_large",
        "connection 'everything': tools/call 'echo' refused: the upstream's answer is over the 1048576-byte limit "
        "for one SSE event",
    )


async def test_concurrent_calls_each_get_their_own_answer(everything: str) -> None:
    defn = define_connection(url=everything).named("everything", None)
    async with pool_for(defn, "fast") as pool:
        answers: dict[int, str] = {}

        async def one(i: int) -> None:
            result = await pool.call_tool("everything", "echo", {"message": f"call {i}"})
            answers[i] = result["content"][0]["text"]

        async with anyio.create_task_group() as tg:
            for i in range(64):
                tg.start_soon(one, i)
        assert answers == {i: f"Echo: call {i}" for i in range(64)}
        assert pool.status("everything").opens == 1


@pytest.fixture(scope="module")
def chatty() -> Iterator[str]:
    """A TypeScript-SDK server whose tools send requests and notifications on the call's own answer stream."""
    port = free_port()
    env = {"MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk"))}
    with running([node20(), str(CHATTY), str(port)], port=port, env=env):
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("leg", LEGS)
async def test_what_the_server_sends_mid_call_is_handled_as_the_sdk_does(chatty: str, leg: str) -> None:
    defn = define_connection(url=f"{chatty}/mcp").named("chatty", None)
    async with pool_for(defn, leg) as pool, httpx2.AsyncClient() as http:
        await pool.list_tools("chatty", use_cache=True)
        # A ping request on the answer stream: the session answers it, the call completes.
        pinged = await outcome(pool, "chatty", "ping-back", {})
        assert pinged["content"] == [{"type": "text", "text": "the client answered the ping with {}"}]
        # A sampling request for a call whose caller has no sampling handler: the pool's client refuses it.
        refused = await outcome(pool, "chatty", "ask-sampling", {})
        assert refused["isError"] is True
        assert refused["content"][0]["text"] == (
            "the client refused: -32600 MCP error -32600: "
            "Sampling not supported: the caller of this tool call cannot answer it"
        )
        # A log message and tools/list_changed before the answer: the cached listing is dropped.
        lists_before = (await http.get(f"{chatty}/lists")).json()
        changed = await outcome(pool, "chatty", "log-and-change", {})
        assert changed["content"] == [{"type": "text", "text": "changed"}]
        await pool.list_tools("chatty", use_cache=True)
        assert (await http.get(f"{chatty}/lists")).json() == lists_before + 1
        assert pool.status("chatty").fast_calls is (leg == "fast")


@pytest.mark.parametrize("leg", LEGS)
async def test_static_headers_reach_the_upstream_on_both_legs(leg: str) -> None:
    port = free_port()
    with running(recording_server(port), port=port):
        url = f"http://127.0.0.1:{port}/mcp"
        # protocol="legacy": the fast leg serves handshake-era sessions (this server also speaks 2026-07-28).
        defn = define_connection(
            url=url, protocol="legacy", headers={"X-Tenant": "t-7", "Authorization": "Bearer static-value"}
        ).named("rec", None)
        async with pool_for(defn, leg) as pool:
            result = await pool.call_tool("rec", "record", {"value": "v"})
            assert pool.status("rec").fast_calls is (leg == "fast")
        assert result["structuredContent"] == {
            "tool": "record",
            "arguments": {"value": "v"},
            "tenant": "t-7",
            "authorization": "Bearer static-value",
        }
        async with httpx2.AsyncClient() as http:
            calls = (await http.get(f"http://127.0.0.1:{port}/calls")).json()
        assert len(calls) == 1


@pytest.mark.parametrize("leg", LEGS)
async def test_baggage_reaches_the_upstream_in_meta_on_both_legs(leg: str) -> None:
    # With no tracer provider there is no span to propagate, but OpenTelemetry baggage set by the
    # caller still travels in the request's `_meta`; with none, the fast leg sends no `_meta` at all.
    port = free_port()
    with running(recording_server(port), port=port):
        defn = define_connection(url=f"http://127.0.0.1:{port}/mcp", protocol="legacy").named("rec", None)
        async with pool_for(defn, leg) as pool:
            token = otel_context.attach(baggage.set_baggage("tenant", "t-9"))
            try:
                await pool.call_tool("rec", "record", {"value": "with"})
            finally:
                otel_context.detach(token)
            await pool.call_tool("rec", "record", {"value": "without"})
            assert pool.status("rec").fast_calls is (leg == "fast")
        async with httpx2.AsyncClient() as http:
            metas = (await http.get(f"http://127.0.0.1:{port}/metas")).json()
    assert len(metas) == 2
    assert metas[0].get("baggage") == "tenant=t-9"
    assert "baggage" not in metas[1] and "traceparent" not in metas[1]


@pytest.mark.parametrize("leg", LEGS)
async def test_a_restarted_upstream_gets_a_new_session_and_the_call_goes_through(leg: str) -> None:
    port = free_port()
    defn = define_connection(url=f"http://127.0.0.1:{port}/mcp").named("everything", None)
    async with pool_for(defn, leg) as pool:
        with running(everything_cmd(), port=port, env={"PORT": str(port)}):
            await pool.call_tool("everything", "echo", {"message": "first"})
        with running(everything_cmd(), port=port, env={"PORT": str(port)}):
            # The new server does not know our session id (it answers 400): one retry on a fresh session.
            result = await pool.call_tool("everything", "echo", {"message": "second"})
        assert not result.get("isError")
        assert pool.status("everything").opens == 2


@pytest.mark.parametrize("leg", LEGS)
async def test_a_stopped_upstream_is_connection_unavailable(leg: str) -> None:
    port = free_port()
    defn = define_connection(url=f"http://127.0.0.1:{port}/mcp").named("everything", None)
    async with pool_for(defn, leg) as pool:
        with running(everything_cmd(), port=port, env={"PORT": str(port)}):
            await pool.call_tool("everything", "echo", {"message": "up"})
        with pytest.raises(ConnectionUnavailable) as caught:
            await pool.call_tool("everything", "echo", {"message": "down"})
        assert "everything" in str(caught.value)


@pytest.mark.parametrize("leg", LEGS)
async def test_a_slow_call_times_out_and_the_next_call_works(everything: str, leg: str) -> None:
    defn = define_connection(url=everything, timeouts={"call": 0.5}).named("everything", None)
    async with pool_for(defn, leg) as pool:
        with pytest.raises(UpstreamTimeout, match=r"timed out after 0\.5s"):
            await pool.call_tool("everything", "trigger-long-running-operation", {"duration": 3, "steps": 3})
        result = await pool.call_tool("everything", "echo", {"message": "after"})
        assert not result.get("isError")
        assert pool.status("everything").opens == 1


async def test_an_idle_connection_the_server_closed_is_not_reused(everything: str) -> None:
    defn = define_connection(url=everything).named("everything", None)
    async with pool_for(defn, "fast") as pool:
        await pool.call_tool("everything", "echo", {"message": "before"})
        await anyio.sleep(5.5)  # past the server's Keep-Alive timeout (5 s): it closed our connection
        result = await pool.call_tool("everything", "echo", {"message": "after"})
        assert not result.get("isError")
        assert pool.status("everything").opens == 1


@contextmanager
def nginx(tmp: Path, server: str, *, listen: str = "", http: str = "") -> Iterator[int]:
    """nginx running one server block (`server`, on a fresh loopback port plus `listen` flags) with
    everything under `tmp`; `http` adds directives to the `http` block. Yields the port."""
    port = free_port()
    conf = tmp / "nginx.conf"
    block = f"server {{ listen 127.0.0.1:{port}{listen};\n{server}\n}}"
    conf.write_text(main_conf(tmp, f"access_log off;\n{http}\n{block}"))
    with running([debian_bin("nginx"), "-p", str(tmp), "-c", str(conf), "-g", "daemon off;"], port=port):
        yield port


def proxied_to(everything: str, extra: str = "") -> str:
    """An nginx `location /` passing every request to server-everything, unbuffered; `extra` adds directives."""
    upstream = urlsplit(everything)
    return f"""
                location / {{
                    proxy_pass http://{upstream.hostname}:{upstream.port};
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_buffering off;
                    {extra}
                }}"""


@pytest.fixture(scope="module")
def tls_front(everything: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """nginx terminating TLS (a certificate for 127.0.0.1 made here) in front of server-everything.

    `/moved` answers 307 to `/mcp`, as a moved endpoint does. Yields the base URL and the certificate.
    """
    tmp = tmp_path_factory.mktemp("nginx")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server = f"""
                ssl_certificate {cert};
                ssl_certificate_key {key};
                location = /moved {{ return 307 /mcp; }}
                {proxied_to(everything)}"""
    with nginx(tmp, server, listen=" ssl") as port:
        yield f"https://127.0.0.1:{port}", cert


async def test_over_tls_through_nginx_and_its_redirect_both_wires_agree(
    tls_front: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, cert = tls_front
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trust the certificate made for this test
    shared_ssl_context.cache_clear()
    answered: list[int] = []  # the status of every request the fast wire sent (observed, not changed)
    send = Http1Origin.request

    async def observed(self: Http1Origin, *args: Any, **kwargs: Any) -> Any:
        response = await send(self, *args, **kwargs)
        answered.append(response.status)
        return response

    monkeypatch.setattr(Http1Origin, "request", observed)
    try:
        seen: dict[tuple[str, str], list[Any]] = {}
        for path in ("/mcp", "/moved"):
            defn = define_connection(url=base + path).named("tls", None)
            for leg in LEGS:
                answered.clear()
                async with pool_for(defn, leg) as pool:
                    seen[path, leg] = [await outcome(pool, "tls", tool, args) for tool, args in CASES[:4]]
                    assert pool.status("tls").fast_calls is (leg == "fast" and path == "/mcp")
                    assert pool.status("tls").opens == 1
                # Over TLS the calls (and the listings the session makes) go on the fast wire. Behind the
                # redirect, the first one hands its request to the SDK path and switches the session's
                # fast wire off: one 307, not one per call.
                if leg == "sdk":
                    assert answered == [], path
                elif path == "/mcp":
                    assert len(answered) >= 4 and set(answered) == {200}, answered
                else:
                    assert answered == [307], answered
        assert seen["/mcp", "fast"] == seen["/mcp", "sdk"] == seen["/moved", "fast"] == seen["/moved", "sdk"]
        assert seen["/mcp", "fast"][0]["content"] == [{"type": "text", "text": "Echo: héllo ✓"}]
    finally:
        shared_ssl_context.cache_clear()


@pytest.fixture(scope="module")
def cutting_front(everything: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """nginx in front of server-everything that cuts any response stream silent for 1 s, as a proxy
    with a short read timeout does. Yields the MCP URL through it."""
    tmp = tmp_path_factory.mktemp("nginx-cut")
    with nginx(tmp, proxied_to(everything, "proxy_read_timeout 1s;")) as port:
        yield f"http://127.0.0.1:{port}/mcp"


async def test_an_answer_stream_cut_mid_call_is_resumed_with_last_event_id(
    cutting_front: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # server-everything opens each answer stream with a priming event (an id, no data) and keeps
    # its events; a 2.5 s call is silent for longer than the proxy's 1 s read timeout, so the POST's
    # stream is cut before the answer. Both wires must resume it (GET with Last-Event-ID, again when
    # that stream is cut too) and return the answer.
    resumed: list[str] = []  # the Last-Event-ID of every GET the fast wire sent (observed, not changed)
    send = Http1Origin.request

    async def observed(self: Http1Origin, method: str, headers: Any, body: bytes = b"") -> Any:
        headers = list(headers)
        if method == "GET":
            resumed.extend(value for name, value in headers if name == "last-event-id")
        return await send(self, method, headers, body)

    monkeypatch.setattr(Http1Origin, "request", observed)
    defn = define_connection(url=cutting_front).named("cut", None)
    seen: dict[str, Any] = {}
    for leg in LEGS:
        resumed.clear()
        async with pool_for(defn, leg) as pool:
            seen[leg] = await outcome(pool, "cut", "trigger-long-running-operation", {"duration": 2.5, "steps": 1})
            assert pool.status("cut").fast_calls is (leg == "fast")
            assert pool.status("cut").opens == 1
        assert bool(resumed) is (leg == "fast"), resumed
    assert seen["fast"] == seen["sdk"]
    assert seen["fast"]["content"][0]["text"].startswith("Long running operation completed")


@pytest.fixture(scope="module")
def logging_front(everything: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """nginx in front of server-everything that logs the body of every request it proxies, one line
    each (JSON-escaped). Yields the MCP URL through it and the log."""
    tmp = tmp_path_factory.mktemp("nginx-bodies")
    log = tmp / "bodies.log"
    server = f"access_log {log} bodies;{proxied_to(everything)}"
    with nginx(tmp, server, http="log_format bodies escape=json '$request_body';") as port:
        yield f"http://127.0.0.1:{port}/mcp", log


async def cancels_logged(log: Path) -> list[str]:
    """The `notifications/cancelled` bodies nginx logged (waiting up to 10 s for the first)."""
    cancels: list[str] = []
    logged = anyio.Path(log)
    with anyio.move_on_after(10):
        while not cancels:
            lines = (await logged.read_text()).splitlines() if await logged.exists() else []
            cancels = [line for line in lines if "notifications/cancelled" in line]
            await anyio.sleep(0.05)
    return cancels


@pytest.mark.parametrize("leg", LEGS)
@pytest.mark.parametrize("ended_by", ["budget", "caller"])
async def test_a_call_ended_early_is_cancelled_upstream(
    logging_front: tuple[str, Path], leg: str, ended_by: str
) -> None:
    # A call ends before its answer: by its own budget (UpstreamTimeout), or by the caller's cancel
    # scope (a cancellation, not a timeout: the pool's deadline must not claim it). Either way the
    # upstream must be told to stop (notifications/cancelled for that request, as the SDK's
    # dispatcher sends), and the session must serve the next call.
    url, log = logging_front
    log.write_text("")
    budget = 0.5 if ended_by == "budget" else 60
    defn = define_connection(url=url, timeouts={"call": budget}).named("logged", None)
    slow = {"duration": 3, "steps": 3}
    async with pool_for(defn, leg) as pool:
        if ended_by == "budget":
            with pytest.raises(UpstreamTimeout, match=r"timed out after 0\.5s"):
                await pool.call_tool("logged", "trigger-long-running-operation", slow)
        else:
            with anyio.move_on_after(0.5) as scope:
                await pool.call_tool("logged", "trigger-long-running-operation", slow)
            assert scope.cancelled_caught
        cancels = await cancels_logged(log)
        assert cancels, "no notifications/cancelled reached the upstream"
        # The fast wire's own request ids: the cancel names the request it sent.
        assert ("agent-sdk-" in cancels[-1]) is (leg == "fast"), cancels[-1]
        assert not (await pool.call_tool("logged", "echo", {"message": "after"})).get("isError")
        assert pool.status("logged").fast_calls is (leg == "fast")
        assert pool.status("logged").opens == 1


def test_the_fast_leg_applies_only_where_it_speaks_for_the_sdk_path(monkeypatch: pytest.MonkeyPatch) -> None:
    async def check() -> None:
        http = define_connection(url="http://127.0.0.1:9/mcp").named("h", None)
        assert fast_calls_apply(http, {"X-Key": "v"})
        assert not fast_calls_apply(http, {"X-Key": "a\r\nInjected: 1"})
        userinfo = define_connection(url="http://user:pw@127.0.0.1:9/mcp").named("u", None)
        assert not fast_calls_apply(userinfo, {})
        sse = define_connection(url="http://127.0.0.1:9/sse", transport="sse").named("s", None)
        assert not fast_calls_apply(sse, {})
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
        assert not fast_calls_apply(http, {})  # httpx2 would use the proxy; this leg cannot

    anyio.run(check)
    # Outside an event loop (and under trio) it never applies: `_http1` is asyncio protocols.
    assert not fast_calls_apply(define_connection(url="http://127.0.0.1:9/mcp").named("h", None), {})
