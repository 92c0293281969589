"""Clients against real upstreams we did not write (server-everything, mcp-server-time), and ours for headers/env."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from connections import (
    ClientPool,
    ConnectionDefinition,
    define_connection,
)
from connections.pool._identity_pool import IdentityPool  # pyright: ignore[reportPrivateUsage]
from tests.conftest import free_port
from tests.peers import node_bin, py_peer
from tests.processes import running

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

UPSTREAMS = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams"


def conn(name: str, **fields: Any) -> ConnectionDefinition:
    return define_connection(**fields).named(name, None)


def text(result: mt.CallToolResult | dict[str, Any]) -> str:
    if isinstance(result, dict):  # the pool's JSON result
        result = mt.CallToolResult.model_validate(result)
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "streamableHttp"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    port = free_port()
    with running([str(node_bin("mcp-server-everything")), "sse"], port=port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/sse"


@pytest.fixture(scope="module")
def counting_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    count = tmp_path_factory.mktemp("count") / "count.txt"
    cmd = [sys.executable, str(UPSTREAMS / "counting_server.py"), "http", str(port)]
    with running(cmd, port=port, env={"COUNT_FILE": str(count)}):
        yield f"http://127.0.0.1:{port}/mcp"


async def check_everything(pool: ClientPool, name: str) -> None:
    tools = {t.name: t for t in await pool.list_tools(name)}
    assert {"echo", "get-sum"} <= set(tools)
    echo = tools["echo"]
    assert echo.annotations is not None and echo.annotations.read_only_hint is True
    assert text(await pool.call_tool(name, "echo", {"message": "hello"})) == "Echo: hello"
    assert "3" in text(await pool.call_tool(name, "get-sum", {"a": 1, "b": 2}))


async def test_everything_over_stdio_lists_calls_and_reads_read_only_hint() -> None:
    defn = conn("everything", command=str(node_bin("mcp-server-everything")), args=["stdio"])
    async with ClientPool({"everything": defn}) as pool:
        await check_everything(pool, "everything")
        status = pool.status("everything")
        assert status.state == "open" and status.opens == 1
        # server-everything speaks the handshake protocol only: auto-detection fell back to it.
        assert status.protocol_version == "2025-11-25"


async def test_everything_over_streamable_http(everything_http: str) -> None:
    defs = {
        "auto": conn("auto", url=everything_http),
        "legacy": conn("legacy", url=everything_http, protocol="legacy"),
    }
    async with ClientPool(defs) as pool:
        await check_everything(pool, "auto")
        await check_everything(pool, "legacy")
        assert pool.status("legacy").protocol_version == "2025-11-25"


async def test_everything_over_legacy_sse(everything_sse: str) -> None:
    async with ClientPool({"sse": conn("sse", url=everything_sse, transport="sse")}) as pool:
        await check_everything(pool, "sse")
        assert pool.definition("sse").kind == "sse"


async def test_mcp_server_time_over_stdio() -> None:
    defn = conn("time", command=str(py_peer("mcp-server-time")), args=["--local-timezone", "UTC"])
    async with ClientPool({"time": defn}) as pool:
        names = {t.name for t in await pool.list_tools("time")}
        assert {"get_current_time", "convert_time"} <= names
        result = await pool.call_tool("time", "get_current_time", {"timezone": "UTC"})
        assert not result.get("isError") and '"timezone": "UTC"' in text(result)


def _no_headers(_session: Any) -> dict[str, Any]:
    return {"headers": {}}


async def test_identity_clients_carry_session_headers_over_static_ones(counting_http: str) -> None:
    defn = conn(
        "tenant", url=counting_http, headers={"X-Tenant": "static", "X-Deploy": "${DEPLOY_NAME}"}, auth=_no_headers
    )
    environ = {"DEPLOY_NAME": "blue"}
    # Session headers win case-insensitively over the static ones; `${VAR}`s expand at open time.
    async with IdentityPool({"tenant": defn}, environ=environ) as pool:
        result = await pool.call_identity_tool("tenant", "header", {"name": "x-tenant"}, {"x-tenant": "alice"})
        assert text(result) == "alice"
        result = await pool.call_identity_tool("tenant", "header", {"name": "X-Tenant"}, {})
        assert text(result) == "static"
        result = await pool.call_identity_tool("tenant", "header", {"name": "X-Deploy"}, {})
        assert text(result) == "blue"
        tools = await pool.list_identity_tools("tenant", {"X-Tenant": "bob"})
        assert "echo" in {t.name for t in tools}


async def test_allow_and_deny_lists_filter_the_listing(everything_http: str) -> None:
    defn = conn("some", url=everything_http, allow_tools=["echo", "get-sum"], deny_tools=["get-sum"])
    async with ClientPool({"some": defn}) as pool:
        assert [t.name for t in await pool.list_tools("some")] == ["echo"]
    async with IdentityPool({"some": replace(defn, auth=_no_headers)}) as identities:
        assert [t.name for t in await identities.list_identity_tools("some", {})] == ["echo"]


async def test_stdio_child_gets_a_minimal_environment_plus_its_definition_env() -> None:
    defn = conn(
        "envcheck",
        command=sys.executable,
        args=[str(UPSTREAMS / "counting_server.py"), "stdio"],
        env={"GIVEN": "${SOURCE_VALUE}"},
    )
    environ = {"PATH": "/usr/bin:/bin", "SOURCE_VALUE": "v", "GATEWAY_API_KEY": "fake-secret"}
    async with ClientPool({"envcheck": defn}, environ=environ) as pool:
        assert text(await pool.call_tool("envcheck", "env", {"name": "GIVEN"})) == "set"
        assert text(await pool.call_tool("envcheck", "env", {"name": "PATH"})) == "set"
        # Not inherited: only INHERITED_ENV and the definition's env reach a child.
        assert text(await pool.call_tool("envcheck", "env", {"name": "GATEWAY_API_KEY"})) == "unset"


@pytest.mark.parametrize(
    ("protocol", "expected"), [("auto", "2026-07-28"), ("legacy", "2025-11-25"), ("modern", "2026-07-28")]
)
async def test_protocol_modes_against_an_mcp_2_server(protocol: str, expected: str) -> None:
    defn = conn("p", command=sys.executable, args=[str(UPSTREAMS / "counting_server.py"), "stdio"], protocol=protocol)
    async with ClientPool({"p": defn}) as pool:
        assert text(await pool.call_tool("p", "echo", {"text": "x"})) == "x"
        assert pool.status("p").protocol_version == expected
