"""The routing table's `Direct` route (`/v1/mcp/tools`) skips Starlette's middleware and router
(`gateway.app._Front`); what they did for it still holds: an exception is a JSON 500 with no
detail, and every other path reaches the app. And the table names every path once."""

from __future__ import annotations

import httpx2
import pytest
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.app import Direct, _Front, _routes  # pyright: ignore[reportPrivateUsage]

pytestmark = pytest.mark.anyio


async def test_an_exception_on_the_direct_route_is_the_json_500_and_other_paths_reach_the_app() -> None:
    async def boom(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("token-0123456789")

    async def rest(scope: Scope, receive: Receive, send: Send) -> None:
        await PlainTextResponse(f"app saw {scope['path']}")(scope, receive, send)

    transport = httpx2.ASGITransport(app=_Front(rest, {"/v1/mcp/tools": boom}), raise_app_exceptions=False)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        failed = await http.post("/v1/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        below = await http.post("/v1/mcp/tools/", json={})
        other = await http.get("/v1/health")
    assert failed.status_code == 500
    assert failed.json() == {"ok": False, "error": "internal_error", "message": "the server failed; see its log"}
    assert "token-0123456789" not in failed.text and "Traceback" not in failed.text
    assert below.text == "app saw /v1/mcp/tools/" and other.text == "app saw /v1/health"


def test_the_routing_table_names_every_path_once_and_the_mcp_tools_route_is_direct() -> None:
    table = _routes()  # pyright: ignore[reportPrivateUsage]
    routed = [(r.path, frozenset(r.methods or ())) for r in table if isinstance(r, Route)]
    direct = [r.path for r in table if isinstance(r, Direct)]
    assert len(routed) == len(set(routed)), routed
    assert direct == ["/v1/mcp/tools"]
    assert all(path not in direct for path, _ in routed)  # nothing in Starlette's part is shadowed
    assert ("/v1/mcp", frozenset()) in routed
