"""Protocol details on both MCP endpoints (issue #19 item 13): JSON-RPC batches for 2025-03-26 (the one
revision that has them) and a sentence for later ones, an unknown `MCP-Protocol-Version` refused by
name, and a wrong `Content-Type` answered with a JSON-RPC error as docs/http-api.md promises."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import Served, assert_clean, serving

ASKING = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "asking.py"

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
PATHS = ["/v1/mcp", "/v1/mcp/tools"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory, "protocol", {}) as served:
        yield served


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("version", [None, "2025-03-26"])
def test_a_2025_03_26_batch_is_answered_message_by_message_in_one_array(
    server: Served, path: str, version: str | None
) -> None:
    headers = HEADERS if version is None else {**HEADERS, "mcp-protocol-version": version}
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
        {"jsonrpc": "1.0", "id": 3, "method": "ping"},
        7,
    ]
    with server.client() as http:
        answered = http.post(path, json=batch, headers=headers)
    assert answered.status_code == 200, answered.text
    first, pong, wrong, number = answered.json()  # the notification has no answer
    assert first["id"] == 1 and isinstance(first["result"]["tools"], list) and first["result"]["tools"]
    assert pong == {"jsonrpc": "2.0", "id": "p", "result": {}}
    assert wrong == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32600, "message": 'Invalid Request: jsonrpc must be "2.0"'},
    }
    assert number["id"] is None and number["error"]["code"] == -32600


@pytest.mark.parametrize("path", PATHS)
def test_a_batch_of_notifications_only_is_202_and_an_empty_batch_one_error(server: Served, path: str) -> None:
    with server.client() as http:
        quiet = http.post(path, json=[{"jsonrpc": "2.0", "method": "notifications/initialized"}], headers=HEADERS)
        empty = http.post(path, content=b"[]", headers=HEADERS)
    assert (quiet.status_code, quiet.content) == (202, b"")
    assert empty.status_code == 400 and empty.json()["error"]["message"] == "Invalid Request: an empty batch"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_a_batch_in_a_later_version_is_refused_with_the_reason(server: Served, path: str, version: str) -> None:
    with server.client() as http:
        refused = http.post(
            path,
            json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
            headers={**HEADERS, "mcp-protocol-version": version},
        )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["message"]) == (
        -32600,
        f"Invalid Request: JSON-RPC batches exist only in MCP 2025-03-26; with MCP-Protocol-Version {version} "
        "send one JSON-RPC message per POST",
    )


@pytest.mark.parametrize("path", PATHS)
def test_an_unknown_protocol_version_is_refused_naming_the_ones_spoken(server: Served, path: str) -> None:
    with server.client() as http:
        refused = http.post(
            path,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**HEADERS, "mcp-protocol-version": "1999-01-01"},
        )
    assert refused.status_code == 400
    spoken = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version '1999-01-01' in MCP-Protocol-Version; this server speaks "
            "2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28: send one of them",
            "data": {"supported": spoken, "requested": "1999-01-01", "requestId": refused.headers["x-request-id"]},
        },
    }
    assert "_meta" not in refused.text


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_wrong_content_type_is_a_json_rpc_error(server: Served, path: str, content_type: str | None) -> None:
    headers = {"accept": "application/json, text/event-stream"}
    if content_type:
        headers["content-type"] = content_type
    with server.client() as http:
        refused = http.post(path, content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', headers=headers)
    assert refused.status_code == 415
    assert refused.headers["content-type"] == "application/json"
    got = f"got {content_type!r}" if content_type else "none was sent"
    assert refused.json()["error"]["message"] == f"Invalid Request: Content-Type must be application/json ({got})"
    assert_clean(refused.text)


@pytest.fixture(scope="module")
def asking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A handshake-era stdio upstream whose `ask_name` asks mid-call (so a 2026-07-28 caller's call is held)."""
    connection = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(ASKING)!r}, '--stdio'],"
        " advertise_tools=True, protocol='legacy')\n"
    )
    with serving(tmp_path_factory, "protocol-asking", {"asking": connection}) as served:
        yield served


def test_a_batch_message_speaking_2026_07_28_is_refused_and_never_held(asking_server: Served) -> None:
    # A 2026-07-28 `_meta` that declares elicitation would hold the call for a retry with requestState,
    # which a 2025-03-26 batch cannot make: the message is refused with the reason, the rest answered.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "ask_name", "arguments": {}, "_meta": meta},
        },
        {"jsonrpc": "2.0", "id": "p", "method": "ping"},
    ]
    with asking_server.client() as http:
        answered = http.post("/v1/mcp/tools", json=batch, headers={**HEADERS, "mcp-protocol-version": "2025-03-26"})
    assert answered.status_code == 200, answered.text
    refused, pong = answered.json()
    assert refused["id"] == 1 and refused["error"]["code"] == -32600, refused
    assert "speaks MCP 2026-07-28" in refused["error"]["message"]
    assert "send it as a POST of its own with MCP-Protocol-Version: 2026-07-28" in refused["error"]["message"]
    assert pong == {"jsonrpc": "2.0", "id": "p", "result": {}}
