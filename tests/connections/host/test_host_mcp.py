"""`host.mcp`: every connection by name (host-only ones too), typed results and typed errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp.types as mt
import pytest

from connections import ClientPool, ConnectionDefinition, HostMcp, UnknownConnection, UnknownTool, define_connection

pytestmark = pytest.mark.anyio

RAW = str(Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "raw_stdio.py")


def raw(name: str, **fields: Any) -> ConnectionDefinition:
    return define_connection(command=sys.executable, args=[RAW], **fields).named(name, None)


def text(result: mt.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, mt.TextContent))


async def test_host_mcp_sees_host_only_connections_and_types_its_errors() -> None:
    conns = {
        "notes": raw("notes", host_only=True),
        "limited": raw("limited", deny_tools=["crash"]),
    }
    async with ClientPool(conns) as pool:
        host = HostMcp(pool)
        assert host.names() == ["limited", "notes"]
        assert "echo" in {t.name for t in await host.list_tools("notes")}
        assert text(await host.call_tool("notes", "echo", {"text": "hi"})) == "hi"
        with pytest.raises(UnknownConnection) as unknown:
            await host.call_tool("nope", "echo", {})
        assert unknown.value.code == "unknown_connection" and "'nope'" in str(unknown.value)
        with pytest.raises(UnknownTool, match="'notes': has no tool 'missing'") as missing:
            await host.call_tool("notes", "missing", {})
        assert missing.value.code == "unknown_tool"
        with pytest.raises(UnknownTool, match="allow/deny"):
            await host.call_tool("limited", "crash", {})
        assert "crash" not in {t.name for t in await host.list_tools("limited")}
