"""Through `/v1/mcp/tools`, an upstream's own -32000 / -32001 reaches the peer as that upstream's error, and another
principal's call in flight on the same stdio child or HTTP session is served (issue 35 item 1).

Two bearer principals; the upstream is `tests/fixtures/upstreams/erring_server.py` (an `mcp` 2.x server),
over stdio (one shared child) and over Streamable HTTP.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.conftest import free_port
from tests.processes import running

from ..conftest import Served, serving, url_connection

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "erring_server.py")
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module", params=["stdio", "http"])
def gateway(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tokens = ("--bearer-token", ALICE, "--bearer-token", BOB)
    if request.param == "stdio":
        connection = (
            "from connections import define_connection\n\n"
            f"connection = define_connection(command={sys.executable!r}, args=[{SERVER!r}, '--stdio'],"
            " advertise_tools=True, protocol='legacy')\n"
        )
        with serving(tmp_path_factory, "erring-stdio", {"up": connection}, *tokens) as served:
            yield served
        return
    port = free_port()
    with running([sys.executable, SERVER, "--port", str(port)], port=port, what="erring upstream"):
        connection = url_connection(f"http://127.0.0.1:{port}/mcp")
        with serving(tmp_path_factory, "erring-http", {"up": connection}, *tokens) as served:
            yield served


async def _call(http: httpx2.AsyncClient, served: Served, token: str, tool: str, arguments: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {**HEADERS, "authorization": f"Bearer {token}", "mcp-protocol-version": "2025-11-25"}
    answer = await http.post(f"{served.url}/v1/mcp/tools", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def _text(result: dict[str, Any]) -> str:
    return result["content"][0]["text"]


async def test_an_upstreams_32000_is_its_error_for_the_peer_and_another_principals_call_is_served(
    gateway: Served,
) -> None:
    held: list[dict[str, Any]] = []
    async with httpx2.AsyncClient(timeout=30) as http:

        async def alice_holds() -> None:
            held.append(await _call(http, gateway, ALICE, "hold", {}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(alice_holds)
                await _call(http, gateway, BOB, "wait_held", {"count": 1})
                for _ in range(6):  # past the default crash-loop count (5): none counts
                    refused = await _call(http, gateway, BOB, "refuse", {"code": -32000, "message": "record not found"})
                    assert refused["isError"] is True
                    assert "upstream error -32000: record not found" in _text(refused)
                busy = await _call(http, gateway, BOB, "refuse", {"code": -32001, "message": "the ledger is busy"})
                assert "upstream error -32001: the ledger is busy" in _text(busy)
                assert "timed out" not in _text(busy)
                released = await _call(http, gateway, BOB, "release", {})
    assert _text(released) == "released 1"  # Alice's call was in flight on the same child all along
    assert [_text(r) for r in held] == ["held, then answered"]
    # Nothing was counted toward a pause: the connection serves on (five counted failures would pause it).
    async with httpx2.AsyncClient(timeout=30) as http:
        assert _text(await _call(http, gateway, ALICE, "echo", {"text": "still"})) == "Echo: still"
