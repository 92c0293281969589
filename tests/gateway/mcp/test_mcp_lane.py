"""The `/v1/mcp/tools` lane (`gateway/mcp/lane.py`) answers `tools/call` and `tools/list` exactly as
the SDK's session manager does, at the handshake versions and at 2026-07-28, and declines the rest.

Both paths run on one real gateway runtime (the app's own lifespan: broker, client pool, catalog),
against the "everything" reference server, an `mcp` 2.x server speaking both generations
(`fixtures/upstreams/both_eras.py`) and the basic project's authored tools; each request is answered
once by `serve_lane` and once by the SDK's session manager, and the two HTTP answers (status,
headers, body bytes) must be the same.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message

from connections import load_project
from connections.serving import CallChannel
from gateway.app import create_app
from gateway.auth.chain import Principal
from gateway.mcp.lane import serve_lane
from gateway.mcp.pipeline import CallPlan, Execute
from gateway.runtime import Runtime
from gateway.settings import ServeSettings
from tests.conftest import free_port
from tests.processes import running as running_process

from ..conftest import Upstream, make_project, url_connection

JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MODERN_VERSION = "2026-07-28"
MODERN = {**JSON_HEADERS, "mcp-protocol-version": MODERN_VERSION}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "lane-test", "version": "1"},
}
BOTH_ERAS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "both_eras.py"


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
    """One POST answered by the lane (`lane`) or by the SDK's manager (`sdk`): (handled, messages sent)."""
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
    if path == "lane":
        delivered = True  # the endpoint read the body; the lane's `receive` only hears a disconnect
        return await serve_lane(manager, runtime, scope, receive, send, len(body), json.loads(body)), sent
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
    handled, fast = await _exchange(runtime, body, headers, path="lane")
    assert handled, message
    fast_status, fast_headers, fast_body = _answer(fast)
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if message.get("method") == "tools/call" and isinstance(meta, dict) and "progressToken" in meta:
        # #14: a call with a progress token is answered on SSE (notifications, then the answer), the
        # SDK's stateless JSON mode answers JSON: the answer itself is the same.
        assert fast_headers[b"content-type"] == b"text/event-stream" and fast_status == slow_status == 200
        last = fast_body.decode().rstrip("\n").split("\n\n")[-1]
        assert json.loads(last.split("data: ", 1)[1]) == json.loads(slow_body), message
        return json.loads(slow_body)
    assert json.loads(fast_body) == json.loads(slow_body), message
    if fast_body != slow_body:
        # The lane splices an upstream's result into its answer as the upstream wrote it (its member
        # order, its escapes: `client/_passthrough.py`) where the SDK serialises the model again; what
        # the gateway writes itself (errors, authored tools, listings) stays the SDK's, byte for byte.
        assert message.get("method") == "tools/call" and message["params"]["name"] in UPSTREAM_TOOLS, message
        del fast_headers[b"content-length"], slow_headers[b"content-length"]
    assert (fast_status, fast_headers) == (slow_status, slow_headers), message
    return json.loads(slow_body)


async def _lane_body(runtime: Runtime, message: dict[str, Any], headers: dict[str, str]) -> bytes:
    """The lane's answer body to `message`."""
    handled, sent = await _exchange(runtime, json.dumps(message).encode(), headers, path="lane")
    assert handled, message
    return _answer(sent)[2]


PASSTHROUGH: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo ✓"}),
    ("get-sum", {"a": "two", "b": 40}),  # the upstream's own error result
    ("get-structured-content", {"location": "Paris"}),  # has an output schema
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("get-resource-links", {"count": 2}),
    ("get-tiny-image", {}),
]


UPSTREAM_TOOLS = frozenset(
    {tool for tool, _ in PASSTHROUGH} | {"weather", "badweather", "fails", "meta", "progress", "routed"}
)
"""Tools of the upstreams (everything's, the both-eras server's): their results can pass through as bytes."""


def _call(name: Any, arguments: Any = None, *, ident: Any = 7, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": body}


@pytest.mark.anyio
async def test_the_lane_answers_handshake_era_calls_exactly_as_the_sdk(tmp_path: Path, everything: Upstream) -> None:
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
        listed = await _same_answer(runtime, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        # The peer speaks the upstream session's version: the answer holds everything's own bytes (its
        # member order, its UTF-8), with the peer's id, where the SDK would serialise the model again.
        at_upstreams_version = {**JSON_HEADERS, "mcp-protocol-version": "2025-11-25"}
        spliced = await _lane_body(runtime, _call("echo", {"message": "héllo ✓"}, ident="s-1"), at_upstreams_version)
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
    everythings = '{"jsonrpc":"2.0","id":"s-1","result":{"content":[{"type":"text","text":"Echo: héllo ✓"}]}}'
    assert spliced == everythings.encode()
    assert error_result["result"]["isError"] is True and "kaboom" in error_result["result"]["content"][0]["text"]
    assert bad_input["result"]["isError"] is True
    assert upstream_bad_input["result"]["isError"] is True  # the upstream's own validation, passed on
    assert {"echo", "lookup", "get-sum"} <= {t["name"] for t in listed["result"]["tools"]}
    assert unknown["error"]["code"] == -32602 and unknown["error"]["data"]["error"] == "unknown_tool"
    assert "echo" in unknown["error"]["data"]["available"]
    assert invalid_name["error"]["code"] == -32602 and invalid_arguments["error"]["code"] == -32602
    assert no_params["error"]["code"] == -32602
    assert with_meta["result"]["structuredContent"]["key"] == "m"


@pytest.mark.anyio
async def test_the_lane_keeps_the_fail_closed_listing_error(tmp_path: Path, everything: Upstream) -> None:
    dead = url_connection(f"http://127.0.0.1:{free_port()}/mcp")
    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url), "deadline": dead})
    async with running(project, tmp_path / "state") as runtime:
        unlisted = await _same_answer(runtime, _call("nope", {}))
        authored = await _same_answer(runtime, _call("lookup", {"key": "k"}))
        # The pool's message about the dead connection changes between two listings (its restart
        # backoff): the two answers agree on status, code and the connection named.
        for headers, listing in (
            (JSON_HEADERS, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            ({**MODERN, "mcp-method": "tools/list"}, _modern_list()),
        ):
            answers = []
            for path in ("lane", "sdk"):
                _, sent = await _exchange(runtime, json.dumps(listing).encode(), headers, path=path)
                status, _, body = _answer(sent)
                error = json.loads(body)["error"]
                answers.append((status, error["code"], [p["connection"] for p in error["data"]["problems"]]))
            assert answers[0] == answers[1] == (200, -32603, ["deadline"]), answers
    assert unlisted["error"]["code"] == -32602
    assert [p["connection"] for p in unlisted["error"]["data"]["connectionErrors"]] == ["deadline"]
    assert authored["result"]["isError"] is False


@pytest.mark.anyio
async def test_the_lane_declines_everything_but_tools_call_and_tools_list(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    call = _call("lookup", {"key": "a"})
    declined: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, JSON_HEADERS),
        ({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}, MODERN),
        ({**call, "extra": 1}, JSON_HEADERS),
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


def _modern_call(
    name: Any, arguments: Any = None, *, meta: dict[str, Any] | None = None, ident: Any = 11
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": {**ENVELOPE, **(meta or {})}}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def _modern_list(ident: Any = 12) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/list", "params": {"_meta": ENVELOPE}}


def _routed(name: str, **extra: str) -> dict[str, str]:
    return {**MODERN, "mcp-method": "tools/call", "mcp-name": name, **extra}


@pytest.fixture(scope="module")
def both_eras() -> Iterator[str]:
    port = free_port()
    with running_process([sys.executable, str(BOTH_ERAS), "--port", str(port), "--sse"], port=port):
        yield f"http://127.0.0.1:{port}/mcp"


def _eras_project(tmp_path: Path, everything: Upstream, both_eras: str) -> Path:
    """The basic project with server-everything and the both-eras server advertised."""
    eras = (  # `echo` is everything's too: a collision would fail the catalog closed
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={both_eras!r}, advertise_tools=True, deny_tools=['echo'])\n"
    )
    return make_project(tmp_path / "project", {"everything": url_connection(everything.url), "eras": eras})


@pytest.mark.anyio
async def test_the_lane_answers_2026_07_28_calls_exactly_as_the_sdk(
    tmp_path: Path, everything: Upstream, both_eras: str
) -> None:
    project = _eras_project(tmp_path, everything, both_eras)
    async with running(project, tmp_path / "state") as runtime:
        listed = await _same_answer(runtime, _modern_list(), {**MODERN, "mcp-method": "tools/list"})
        authored = await _same_answer(runtime, _modern_call("lookup", {"key": "ab"}), _routed("lookup"))
        echo = await _same_answer(runtime, _modern_call("echo", {"message": "héllo ✓"}), _routed("echo"))
        failing = await _same_answer(runtime, _modern_call("explode", {}), _routed("explode"))
        structured = await _same_answer(runtime, _modern_call("weather", {"city": "Oslo"}), _routed("weather"))
        fails = await _same_answer(runtime, _modern_call("fails", {}), _routed("fails"))
        meta = await _same_answer(runtime, _modern_call("meta", {}), _routed("meta"))
        sse = await _same_answer(runtime, _modern_call("progress", {"steps": 2}), _routed("progress"))
        progress = await _same_answer(
            runtime, _modern_call("lookup", {"key": "p"}, meta={"progressToken": "tok-1"}), _routed("lookup")
        )
        raised = await _same_answer(runtime, _modern_call("raises", {}), _routed("raises"))
        unknown = await _same_answer(runtime, _modern_call("nope", {}), _routed("nope"))
        invalid = await _same_answer(runtime, _modern_call("lookup", [1]), _routed("lookup"))
        for tool, args in PASSTHROUGH:
            await _same_answer(runtime, _modern_call(tool, args), _routed(tool))
    names = {t["name"] for t in listed["result"]["tools"]}
    assert {"echo", "lookup", "weather", "routed"} <= names and listed["result"]["resultType"] == "complete"
    stamp = listed["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert stamp["name"] == "agent-sdk-tools"
    assert authored["result"]["structuredContent"]["value"] == "AB"
    assert echo["result"]["content"] == [{"type": "text", "text": "Echo: héllo ✓"}]
    assert failing["result"]["isError"] is True and fails["result"]["isError"] is True
    assert structured["result"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    # The upstream's own `_meta` comes through; its serverInfo stamp does not (the peer gets ours).
    assert meta["result"]["_meta"]["example.com/trace"] == "t-1"
    assert meta["result"]["_meta"]["io.modelcontextprotocol/serverInfo"] == stamp
    assert sse["result"]["content"][0]["text"] == "done after 2"
    assert progress["result"]["structuredContent"]["key"] == "p"
    assert raised["result"]["isError"] is True and "raises always refuses" in raised["result"]["content"][0]["text"]
    assert unknown["error"]["code"] == -32602 and unknown["error"]["data"]["error"] == "unknown_tool"
    assert invalid["error"]["code"] == -32602


@pytest.mark.anyio
async def test_the_lane_rejects_2026_07_28_requests_as_the_spec_says(
    tmp_path: Path, everything: Upstream, both_eras: str
) -> None:
    project = _eras_project(tmp_path, everything, both_eras)
    region = _modern_call("routed", {"region": "eu-west"})
    async with running(project, tmp_path / "state") as runtime:
        routed = await _same_answer(runtime, region, _routed("routed", **{"mcp-param-region": "eu-west"}))
        missing_param = await _same_answer(runtime, region, _routed("routed"))
        wrong_param = await _same_answer(runtime, region, _routed("routed", **{"mcp-param-region": "us-east"}))
        stray_param = await _same_answer(
            runtime, _modern_call("routed", {}), _routed("routed", **{"mcp-param-region": "eu-west"})
        )
        # A wrong header with malformed params: the header check comes first (as in the SDK), unless
        # the envelope itself is malformed (the SDK then cannot list the schema and skips it).
        odd_envelope = _modern_call(
            "routed", {"region": "eu-west"}, meta={"io.modelcontextprotocol/clientCapabilities": 5}
        )
        both_wrong = await _same_answer(runtime, odd_envelope, _routed("routed", **{"mcp-param-region": "us-east"}))
        odd_param = _modern_call("routed", {"region": "eu-west"})
        odd_param["params"]["inputResponses"] = 5
        header_first = await _same_answer(runtime, odd_param, _routed("routed", **{"mcp-param-region": "us-east"}))
        odd_only = await _same_answer(runtime, odd_param, _routed("routed", **{"mcp-param-region": "eu-west"}))
        wrong_name = await _same_answer(runtime, _modern_call("lookup", {"key": "a"}), _routed("echo"))
        wrong_method = await _same_answer(
            runtime, _modern_call("lookup", {"key": "a"}), {**_routed("lookup"), "mcp-method": "tools/list"}
        )
        no_envelope = await _same_answer(runtime, _call("lookup", {"key": "a"}), _routed("lookup"))
        later = {**_modern_call("lookup", {"key": "a"})}
        later["params"] = {
            **later["params"],
            "_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
        }
        unsupported = await _same_answer(runtime, later, {**_routed("lookup"), "mcp-protocol-version": "2099-01-01"})
    assert routed["result"]["content"][0]["text"] == "eu-west via eu-west"
    assert odd_only["error"]["code"] == both_wrong["error"]["code"] == -32602
    for rejected in (missing_param, wrong_param, stray_param, header_first, wrong_name, wrong_method):
        assert rejected["error"]["code"] == -32020, rejected  # HEADER_MISMATCH
    assert no_envelope["error"]["code"] == -32602
    assert unsupported["error"]["code"] == -32022 and unsupported["error"]["data"]["supported"] == [MODERN_VERSION]


def test_the_instructions_middleware_leaves_the_lane_on() -> None:
    # `/v1/mcp/tools` sets its instructions in a middleware of `initialize` and `server/discover` only: the
    # lane must still answer `tools/*` (a middleware on them would hand every call to the SDK's slower path).
    from gateway.mcp.instructions import InstructionsMiddleware
    from gateway.mcp.lane import _sdk_adds_nothing  # pyright: ignore[reportPrivateUsage]
    from gateway.mcp.tools import tools_server

    server = tools_server()
    assert any(isinstance(m, InstructionsMiddleware) for m in server.middleware)
    assert _sdk_adds_nothing(server)


@pytest.mark.anyio
async def test_a_wrapper_on_the_executor_sees_every_tools_call_whichever_writer_answers(
    tmp_path: Path, everything: Upstream
) -> None:
    # The one place policy, audit and tracing attach (`gateway/mcp/pipeline.py`): the SDK's session, the
    # lane's JSON answer and its SSE answer all run the same executor, and so the same wrappers.
    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url)})
    seen: list[tuple[str, str, str]] = []

    async def audit(plan: CallPlan, channel: CallChannel, call_next: Execute) -> dict[str, Any]:
        result = await call_next(plan, channel)
        seen.append((plan.answer, plan.target.name, plan.principal))
        return result

    async with running(project, tmp_path / "state") as runtime:
        runtime.executor.wrap(audit)
        await _same_answer(runtime, _call("echo", {"message": "plain"}))
        await _same_answer(runtime, _call("echo", {"message": "streamed"}, _meta={"progressToken": "p-1"}))
    assert seen == [
        ("session", "echo", "loopback"),  # the SDK's manager
        ("json", "echo", "loopback"),
        ("session", "echo", "loopback"),
        ("sse", "echo", "loopback"),  # a progress token: the lane's SSE answer
    ]


@pytest.mark.anyio
async def test_a_wrapper_that_rewrites_a_result_is_answered_with_its_rewrite_not_the_upstreams_bytes(
    tmp_path: Path, everything: Upstream
) -> None:
    # The lane splices an upstream's bytes only when the result the wrappers return is the executor's own:
    # a policy that redacts, or any wrapper that replaces the result, is what the peer gets.
    project = make_project(tmp_path / "project", {"everything": url_connection(everything.url)})

    async def redact(plan: CallPlan, channel: CallChannel, call_next: Execute) -> dict[str, Any]:
        result = await call_next(plan, channel)
        return {**result, "content": [{"type": "text", "text": "[redacted]"}]}

    at_upstreams_version = {**JSON_HEADERS, "mcp-protocol-version": "2025-11-25"}
    async with running(project, tmp_path / "state") as runtime:
        plain = json.loads(await _lane_body(runtime, _call("echo", {"message": "secret"}), at_upstreams_version))
        runtime.executor.wrap(redact)
        rewritten = await _same_answer(runtime, _call("echo", {"message": "secret"}), at_upstreams_version)
    assert plain["result"]["content"] == [{"type": "text", "text": "Echo: secret"}]
    assert rewritten["result"]["content"] == [{"type": "text", "text": "[redacted]"}]
