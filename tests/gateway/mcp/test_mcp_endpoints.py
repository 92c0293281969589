"""Both MCP endpoints over real HTTP with the Python SDK client (modern and legacy), plus malformed
JSON-RPC and the fail-closed listing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.conftest import free_port

from ..conftest import Served, Upstream, assert_clean, make_project, serve, serving, url_connection

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    with serving(tmp_path_factory, "mcp", {"everything": url_connection(everything.url)}) as served:
        yield served


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("broken")
    project = make_project(root / "project", {"deadline": url_connection(f"http://127.0.0.1:{free_port()}/mcp")})
    served = serve(project, root / "state")
    yield served
    served.stop()


def _structured(result: Any) -> dict[str, Any]:
    return json.loads(result.content[0].text)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_client_lists_and_calls_native_tools(server: Served, mode: str) -> None:
    async with Client(f"{server.url}/v1/mcp/tools", mode=mode) as client:  # type: ignore[arg-type]
        listed = {t.name: t for t in (await client.list_tools()).tools}
        authored = await client.call_tool("lookup", {"key": "ab"})
        advertised = await client.call_tool("echo", {"message": "hi"})
        bad_input = await client.call_tool("lookup", {"key": ""})
        raised = await client.call_tool("explode", {})
    assert {"lookup", "bump", "explode", "echo", "get-sum"} <= set(listed)
    assert listed["lookup"].annotations is not None and listed["lookup"].annotations.read_only_hint is True
    assert listed["lookup"].input_schema["required"] == ["key"]
    assert listed["echo"].annotations is not None and listed["echo"].annotations.read_only_hint is True
    assert authored.is_error is False and authored.structured_content == {"key": "ab", "value": "AB", "session": None}
    assert advertised.content[0].text == "Echo: hi"  # type: ignore[union-attr]
    assert bad_input.is_error is True and "key" in bad_input.content[0].text  # type: ignore[union-attr]
    assert raised.is_error is True and "kaboom" in raised.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_client_unknown_tool_is_a_jsonrpc_error(server: Served, mode: str) -> None:
    async with Client(f"{server.url}/v1/mcp/tools", mode=mode) as client:  # type: ignore[arg-type]
        with pytest.raises(MCPError) as caught:
            await client.call_tool("nope", {})
    assert "nope" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_python_client_asks_and_checks(server: Served, mode: str) -> None:
    async with Client(f"{server.url}/v1/mcp", mode=mode) as client:  # type: ignore[arg-type]
        names = {t.name for t in (await client.list_tools()).tools}
        asked = _structured(await client.call_tool("ask", {"message": "hello there"}))
        follow = _structured(
            await client.call_tool("ask", {"message": "again", "continuationToken": asked["continuationToken"]})
        )
        running = _structured(await client.call_tool("ask", {"message": "sleep 60", "waitMs": 0}))
        checked = _structured(await client.call_tool("check", {"sessionId": running["sessionId"]}))
        preempted = _structured(await client.call_tool("ask", {"message": "done", "sessionId": running["sessionId"]}))
        called = _structured(
            await client.call_tool(
                "call_tool", {"name": "lookup", "input": {"key": "z"}, "sessionId": asked["sessionId"]}
            )
        )
        stale = await client.call_tool("ask", {"message": "x", "continuationToken": asked["continuationToken"]})
        missing = await client.call_tool("check", {"sessionId": "ses_000000000000000000000000"})
    assert names == {"ask", "check", "call_tool"}
    assert asked["status"] == "completed" and asked["reply"] == "hello there"
    assert follow["sessionId"] == asked["sessionId"] and follow["reply"] == "again"
    assert follow["continuationToken"] != asked["continuationToken"]
    assert running["status"] == "running" and checked["status"] == "running"
    assert preempted["status"] == "completed" and preempted["reply"] == "done"
    assert called["ok"] is True and called["result"]["session"] == asked["sessionId"]
    assert stale.is_error is True and _structured(stale)["error"] == "stale_continuation_token"
    assert missing.is_error is True and _structured(missing)["error"] == "session_not_found"


@pytest.mark.anyio
async def test_failing_connection_makes_tools_list_a_jsonrpc_error_naming_it(broken: Served) -> None:
    async with Client(f"{broken.url}/v1/mcp/tools", mode="legacy") as client:
        with pytest.raises(MCPError) as caught:
            await client.list_tools()
    assert "deadline" in caught.value.message
    assert caught.value.data["problems"][0]["connection"] == "deadline"
    # An authored tool stays callable (the SDK client itself re-lists before validating a result, so raw here).
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup", "arguments": {"key": "k"}}}
    still_callable = httpx2.post(f"{broken.url}/v1/mcp/tools", json=call, headers=MCP_HEADERS).json()
    assert still_callable["result"]["isError"] is False


@pytest.mark.anyio
async def test_a_turn_whose_toolset_cannot_be_built_fails_with_the_builders_problems(broken: Served) -> None:
    async with Client(f"{broken.url}/v1/mcp") as client:
        asked = _structured(await client.call_tool("ask", {"message": "hello"}))
    assert asked["status"] == "failed" and asked["error"] == "turn_build_failed"
    assert asked["problems"][0]["connection"] == "deadline"
    with broken.client() as http:
        events = http.get(f"/v1/session/{asked['sessionId']}/events", params={"format": "json"}).json()["events"]
    failed = [e for e in events if e["type"] == "turn.failed"]
    assert len(failed) == 1 and failed[0]["data"]["problems"][0]["connection"] == "deadline"
    assert "turn.completed" not in {e["type"] for e in events}


@pytest.mark.parametrize("path", ["/v1/mcp", "/v1/mcp/tools"])
def test_get_and_delete_are_405(server: Served, path: str) -> None:
    with server.client() as http:
        for method in ("GET", "DELETE", "PUT"):
            response = http.request(method, path, headers={"accept": "text/event-stream"})
            assert response.status_code == 405
            assert response.headers["allow"] == "POST"
            assert response.json()["error"]["code"] == -32600


# Batches depend on the protocol version: tests/gateway/mcp/test_mcp_protocol_details.py.
MALFORMED = [
    ("not json", b"{", 400, -32700),
    ("a string", b'"tools/list"', 400, -32600),
    ("null", b"null", 400, -32600),
    ("method is a number", b'{"jsonrpc":"2.0","id":1,"method":5}', 400, -32600),
    ("id is an object", b'{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}', 400, -32600),
    ("wrong jsonrpc", b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}', 400, -32600),
    ("params is a string", b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}', 400, -32602),
    ("no method", b'{"jsonrpc":"2.0","id":1}', 400, -32600),
]


@pytest.mark.parametrize("path", ["/v1/mcp", "/v1/mcp/tools"])
@pytest.mark.parametrize("version", [None, "2025-11-25", "2026-07-28"])
def test_malformed_jsonrpc_is_a_clean_400(server: Served, path: str, version: str | None) -> None:
    headers = dict(MCP_HEADERS)
    if version:
        headers["mcp-protocol-version"] = version
    with server.client() as http:
        for label, body, status, code in MALFORMED:
            response = http.post(path, content=body, headers=headers)
            assert response.status_code == status, label
            assert response.json()["error"]["code"] == code, label
            assert_clean(response.text)


@pytest.mark.parametrize("path", ["/v1/mcp", "/v1/mcp/tools"])
def test_unknown_method_and_wrong_param_types_are_jsonrpc_errors(server: Served, path: str) -> None:
    with server.client() as http:
        unknown = http.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "nope/nope"}, headers=MCP_HEADERS)
        wrong = http.post(
            path,
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": 5}},
            headers=MCP_HEADERS,
        )
        no_accept = http.post(
            path, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers={"accept": "text/html"}
        )
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    assert wrong.status_code < 500 and wrong.json()["error"]["code"] == -32602
    assert 400 <= no_accept.status_code < 500
    for response in (unknown, wrong, no_accept):
        assert_clean(response.text)


def test_raw_tools_list_over_both_protocol_eras(server: Served) -> None:
    legacy = httpx2.post(
        f"{server.url}/v1/mcp/tools",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**MCP_HEADERS, "mcp-protocol-version": "2025-11-25"},
    )
    assert legacy.status_code == 200
    assert "lookup" in {t["name"] for t in legacy.json()["result"]["tools"]}
