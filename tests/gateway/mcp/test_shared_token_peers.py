"""Two handshake-era clients sharing one bearer token are two peers: each has its own `Mcp-Session-Id`, and a
`notifications/cancelled` or `logging/setLevel` of one never reaches the other's calls, though their
request ids collide (every `mcp` client numbers its requests from the same start).

Peers: two `mcp` 2.x `Client`s at 2025-11-25. Upstream: `tests/fixtures/upstreams/erring_server.py`
over stdio (one shared child, which sees the cancelled call's `notifications/cancelled`).
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ..conftest import Served, serving

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "erring_server.py")
TOKEN = "shared-token-for-two-clients-0123456789"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    connection = (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{SERVER!r}, '--stdio'],"
        " advertise_tools=True, protocol='legacy')\n"
    )
    with serving(tmp_path_factory, "shared-token", {"up": connection}, "--bearer-token", TOKEN) as served:
        yield served


@asynccontextmanager
async def _peer(served: Served, sent: list[dict[str, Any]] | None = None, on_log: Any = None) -> AsyncGenerator[Client]:
    """A handshake-era `mcp` client with the shared token; the JSON-RPC messages it POSTs go to `sent`."""

    async def record(request: httpx2.Request) -> None:
        if sent is not None and request.method == "POST":
            sent.append(json.loads(request.content))

    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(timeout=30, headers=headers, event_hooks={"request": [record]}) as http:
        transport = streamable_http_client(f"{served.url}/v1/mcp/tools", http_client=http)
        async with Client(transport, mode="legacy", cache=None, logging_callback=on_log) as client:  # pyright: ignore[reportArgumentType]
            yield client


def _text(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


def _call_ids(sent: list[dict[str, Any]]) -> list[Any]:
    return [m["id"] for m in sent if m.get("method") == "tools/call"]


async def test_one_clients_cancel_never_cancels_the_other_clients_call_with_the_same_id(gateway: Served) -> None:
    sent_a: list[dict[str, Any]] = []
    sent_b: list[dict[str, Any]] = []
    answers: list[str] = []
    released: list[str] = []
    with anyio.fail_after(60):
        async with _peer(gateway, sent_a) as a, _peer(gateway, sent_b) as b, _peer(gateway) as watcher:
            a_scope = anyio.CancelScope()

            async def a_calls() -> None:
                with a_scope:
                    await a.call_tool("hold", {})

            async def b_calls() -> None:
                answers.append(_text(await b.call_tool("hold", {})))

            async with anyio.create_task_group() as tg:
                tg.start_soon(a_calls)
                await watcher.call_tool("wait_held", {"count": 1})
                tg.start_soon(b_calls)  # the same request id, registered after A's
                await watcher.call_tool("wait_held", {"count": 2})
                assert _call_ids(sent_a) == _call_ids(sent_b)  # the ids really collide
                a_scope.cancel()  # A gives up: its client POSTs notifications/cancelled for that id
                # A's call, and only A's, is cancelled upstream; B's is still held there.
                await watcher.call_tool("wait_held", {"count": 1})
                released.append(_text(await watcher.call_tool("release", {})))
    assert released == ["released 1"]
    assert answers == ["held, then answered"]
    assert any(m.get("method") == "notifications/cancelled" for m in sent_a)


async def test_one_clients_log_level_never_changes_the_other_clients(gateway: Served) -> None:
    heard: list[str] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        heard.append(params.level)

    with anyio.fail_after(60), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # logging/setLevel is deprecated at 2026-07-28; the handshake era has it
        async with _peer(gateway, on_log=on_log) as a, _peer(gateway) as b:
            await a.session.set_logging_level("error")  # pyright: ignore[reportDeprecated]
            await b.session.set_logging_level("debug")  # pyright: ignore[reportDeprecated]  # later, same principal
            assert _text(await a.call_tool("talk", {})) == "talked"
    assert heard == ["error"]  # A's own level, not B's later one
