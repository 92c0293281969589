"""The `/v1/mcp/tools` fast path answers a handshake-era `tools/call` exactly as the SDK's stateless
transport does, and declines everything else.

Both paths run on one real gateway runtime (the app's own lifespan: broker, client pool, catalog),
against the "everything" reference server and the basic project's authored tools; each request
is answered once by `serve_tools_call` and once by the SDK's session manager, and the two HTTP
answers (status, headers, body bytes) must be the same.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message

from connections import load_project
from gateway.app import create_app
from gateway.auth_chain import Principal
from gateway.mcp_endpoints import _tools_call_handler  # pyright: ignore[reportPrivateUsage]
from gateway.mcp_fast_path import serve_tools_call
from gateway.runtime import Runtime
from gateway.settings import ServeSettings
from tests.conftest import free_port

from .conftest import Upstream, make_project, url_connection

JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@asynccontextmanager
async def running(project: Path, state_root: Path) -> AsyncIterator[Runtime]:
    """The gateway app's lifespan, driven over ASGI as uvicorn drives it; yields its runtime."""
    app = create_app(load_project(project), ServeSettings(state_root=state_root))
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](4)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](4)
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            app, {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}, app_inbox.receive, app_outbox.send
        )
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        try:
            yield state["runtime"]
        finally:
            await to_app.send({"type": "lifespan.shutdown"})
            assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


def _scope(runtime: Runtime, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/mcp/tools",
        "raw_path": b"/v1/mcp/tools",
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 3000),
        "state": {"runtime": runtime, "principal": Principal("loopback", "loopback")},
    }


async def _exchange(runtime: Runtime, body: bytes, headers: dict[str, str], *, path: str) -> tuple[bool, list[Message]]:
    """One POST answered by the fast path (`lane`: the handler called directly, as `McpEndpoint` does;
    `kernel`: through the SDK's `serve_one`) or by the SDK's manager (`sdk`): (handled, messages sent)."""
    sent: list[Message] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    manager = runtime.mcp["tools"]
    scope = _scope(runtime, {**headers, "content-length": str(len(body))})
    if path != "sdk":
        handler = _tools_call_handler if path == "lane" else None
        return await serve_tools_call(manager, scope, receive, send, body, json.loads(body), handler=handler), sent
    await manager.handle_request(scope, receive, send)
    return True, sent


def _answer(sent: list[Message]) -> tuple[int, dict[bytes, bytes], bytes]:
    start, *rest = sent
    assert start["type"] == "http.response.start"
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in rest)


async def _same_answer(runtime: Runtime, message: dict[str, Any], headers: dict[str, str] = JSON_HEADERS) -> Any:
    body = json.dumps(message).encode()
    _, slow = await _exchange(runtime, body, headers, path="sdk")
    slow_status, slow_headers, slow_body = _answer(slow)
    for path in ("lane", "kernel"):
        handled, fast = await _exchange(runtime, body, headers, path=path)
        assert handled, (path, message)
        fast_status, fast_headers, fast_body = _answer(fast)
        assert (fast_status, fast_headers) == (slow_status, slow_headers), (path, message)
        assert json.loads(fast_body) == json.loads(slow_body), (path, message)
        assert fast_body == slow_body, (path, message)
    return json.loads(slow_body)


PASSTHROUGH: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo ✓"}),
    ("get-sum", {"a": "two", "b": 40}),  # the upstream's own error result
    ("get-structured-content", {"location": "Paris"}),  # has an output schema
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-resource-links", {"count": 2}),
    ("get-tiny-image", {}),
]


def _call(name: Any, arguments: Any = None, *, ident: Any = 7, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": body}


@pytest.mark.anyio
async def test_fast_path_answers_tools_call_exactly_as_the_sdk(tmp_path: Path, everything: Upstream) -> None:
    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url)})
    async with running(project, tmp_path / "state") as runtime:
        authored = await _same_answer(runtime, _call("lookup", {"key": "ab"}))
        passthrough = await _same_answer(runtime, _call("echo", {"message": "hi"}, ident="call-1"))
        error_result = await _same_answer(runtime, _call("explode", {}))
        bad_input = await _same_answer(runtime, _call("lookup", {"key": ""}))
        upstream_bad_input = await _same_answer(runtime, _call("echo", {}))
        unknown = await _same_answer(runtime, _call("nope", {}))
        invalid_name = await _same_answer(runtime, _call(5, {}))
        invalid_arguments = await _same_answer(runtime, _call("lookup", [1, 2]))
        no_params = await _same_answer(runtime, {"jsonrpc": "2.0", "id": 3, "method": "tools/call"})
        with_meta = await _same_answer(runtime, _call("lookup", {"key": "m"}, _meta={"progressToken": "p1"}))
        for version in ("2025-11-25", "2025-06-18", "2025-03-26"):
            versioned = {**JSON_HEADERS, "mcp-protocol-version": version}
            await _same_answer(runtime, _call("lookup", {"key": "v"}), versioned)
            for tool, args in PASSTHROUGH:
                await _same_answer(runtime, _call(tool, args), versioned)
        # The lane's passthrough results stayed JSON from the upstream (the pool's raw lane), except the
        # tool with an output schema, whose structured content the SDK path checks.
        echo, _, _ = await runtime.catalog.tool("echo")
        structured, _, _ = await runtime.catalog.tool("get-structured-content")
        assert echo is not None and structured is not None
        raw_echo, raw_structured = await echo.call_raw({"message": "raw"}), await structured.call_raw({"location": "P"})
        assert raw_echo is not None and raw_echo.version == "2025-11-25"
        assert raw_structured is not None and raw_structured.version is None
        await _same_answer(
            runtime,
            _call("echo", {"message": "x"}),
            {"content-type": "application/json; charset=utf-8", "accept": "*/*"},
        )
        await _same_answer(
            runtime, _call("lookup", {"key": "j"}), {"content-type": "application/json", "accept": "application/json"}
        )
    assert authored["id"] == 7 and authored["result"]["structuredContent"] == {
        "key": "ab",
        "value": "AB",
        "session": None,
    }
    assert passthrough["id"] == "call-1" and passthrough["result"]["content"][0]["text"] == "Echo: hi"
    assert error_result["result"]["isError"] is True and "kaboom" in error_result["result"]["content"][0]["text"]
    assert bad_input["result"]["isError"] is True
    assert "result" in upstream_bad_input or "error" in upstream_bad_input
    assert unknown["error"]["code"] == -32602 and unknown["error"]["data"]["error"] == "unknown_tool"
    assert "echo" in unknown["error"]["data"]["available"]
    assert invalid_name["error"]["code"] == -32602 and invalid_arguments["error"]["code"] == -32602
    assert no_params["error"]["code"] == -32602
    assert with_meta["result"]["structuredContent"]["key"] == "m"


@pytest.mark.anyio
async def test_fast_path_keeps_the_fail_closed_listing_error(tmp_path: Path, everything: Upstream) -> None:
    dead = url_connection(f"http://127.0.0.1:{free_port()}/mcp")
    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url), "deadline": dead})
    async with running(project, tmp_path / "state") as runtime:
        unlisted = await _same_answer(runtime, _call("nope", {}))
        authored = await _same_answer(runtime, _call("lookup", {"key": "k"}))
    assert unlisted["error"]["code"] == -32602
    assert [p["connection"] for p in unlisted["error"]["data"]["connectionErrors"]] == ["deadline"]
    assert authored["result"]["isError"] is False


@pytest.mark.anyio
async def test_fast_path_declines_everything_but_a_handshake_era_tools_call(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    call = _call("lookup", {"key": "a"})
    declined: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, JSON_HEADERS),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, JSON_HEADERS),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            JSON_HEADERS,
        ),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, JSON_HEADERS),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, JSON_HEADERS),
        ({"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": {"name": "lookup"}}, JSON_HEADERS),
        (call, {**JSON_HEADERS, "mcp-protocol-version": "2026-07-28"}),
        (call, {**JSON_HEADERS, "mcp-protocol-version": "1999-01-01"}),
        (call, {**JSON_HEADERS, "content-type": "text/plain"}),
        (call, {**JSON_HEADERS, "content-type": "application/json-seq"}),
        (call, {"content-type": "application/json", "accept": "text/event-stream"}),
        (call, {"content-type": "application/json"}),
    ]
    async with running(project, tmp_path / "state") as runtime:
        for message, headers in declined:
            handled, sent = await _exchange(runtime, json.dumps(message).encode(), headers, path="lane")
            assert (handled, sent) == (False, []), (message, headers)
        handled, sent = await _exchange(runtime, b"[" + json.dumps(call).encode() + b"]", JSON_HEADERS, path="lane")
        assert (handled, sent) == (False, [])
