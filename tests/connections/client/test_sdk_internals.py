"""The private parts of `mcp` and `httpx2` the fast wire stands on are where it expects.

The fast wire is `connections/client/_fast_calls.py` and `connections/client/_fast_answers.py`.

`pyproject.toml` pins both to the minor release this was checked against. A new release may move
any of them; this test then fails naming each one that moved, instead of the fast wire quietly
switching itself off (or worse) in production.
"""

from __future__ import annotations

import inspect
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client import streamable_http
from mcp.server.mcpserver import MCPServer
from mcp.shared import jsonrpc_dispatcher
from mcp.shared.exceptions import MCPError

from connections.client import _fast_answers, _restart, _translate

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[3]


def parameters(function: Any) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


def moved_from_a_session(client: Client) -> list[str]:
    """What the fast wire reads from an open `ClientSession`, each that is missing or reshaped, by name."""
    moved: list[str] = []
    session = client.session
    dispatcher = getattr(session, "_dispatcher", None)
    if dispatcher is None:
        return ["ClientSession._dispatcher (the dispatcher the fast wire stands in for)"]
    expected = {
        "send_raw_request": ["method", "params", "opts"],
        "notify": ["method", "params", "opts"],
    }
    for name, wanted in expected.items():
        found = getattr(dispatcher, name, None)
        if not callable(found) or parameters(found)[:3] != wanted:
            moved.append(f"ClientSession._dispatcher.{name}({', '.join(wanted)})")
    for name in ("_on_request", "_on_notify"):  # answer server requests / route notifications met on a stream
        found = getattr(session, name, None)
        if not callable(found) or parameters(found) != ["dctx", "method", "params"]:
            moved.append(f"ClientSession.{name}(dctx, method, params)")
    return moved


async def test_the_sdk_internals_the_fast_wire_uses_are_where_it_expects() -> None:
    server = MCPServer("probe")

    @server.tool()
    def echo(text: str) -> str:
        return text

    async with Client(server, mode="legacy") as client:
        moved = moved_from_a_session(client)
    if _fast_answers._SSEParser is None:  # pyright: ignore[reportPrivateUsage]
        moved.append("httpx2._sse._SSEParser (both wires parse SSE with it)")
    elif [n for n in ("decode", "flush") if not callable(getattr(_fast_answers._SSEParser, n, None))]:  # pyright: ignore[reportPrivateUsage]
        moved.append("httpx2._sse._SSEParser.decode / .flush")
    versions = f"mcp {metadata.version('mcp')}, httpx2 {metadata.version('httpx2')}"
    assert moved == [], f"{versions} moved what the fast wire relies on: {'; '.join(moved)}"


def test_the_pins_hold_the_installed_releases() -> None:
    pins = dict(re.findall(r'"(mcp|httpx2)>=[\d.]+,<([\d.]+)"', (ROOT / "pyproject.toml").read_text()))
    assert set(pins) == {"mcp", "httpx2"}, "pyproject.toml must pin mcp and httpx2 below their next minor release"
    for name, ceiling in pins.items():
        installed = tuple(int(p) for p in metadata.version(name).split(".")[:2])
        assert installed < tuple(int(p) for p in ceiling.split(".")), f"{name} {metadata.version(name)} is past its pin"


def test_the_sdks_own_connection_closed_texts_are_the_ones_made_here_recognises() -> None:
    # `made_here` (`client/_translate.py`) and `alive_after` (`client/_restart.py`) tell the SDK's -32000 from another's
    # by these texts and the transport's state: a release that rewords them must fail here, not mislabel errors.
    closed = jsonrpc_dispatcher._CLOSED_OUTCOME  # pyright: ignore[reportPrivateUsage]
    assert (closed.code, closed.message) == (-32000, _restart._SDK_CLOSED)  # pyright: ignore[reportPrivateUsage]
    source = inspect.getsource(streamable_http.StreamableHTTPTransport)
    # Every answer the transport makes up with the default code (-32000); one with `code=` of its own is not one.
    made = re.findall(r'_resolve_abandoned_request\(\s*[^,]+,\s*[^,]+,\s*f?"([^"]+)"(\s*,\s*code=)?', source)
    texts = [text for text, own_code in made if not own_code]
    assert len(texts) >= 3, "StreamableHTTPTransport no longer resolves abandoned requests where expected"
    for text in texts:
        sample = text.replace("{exc}", "boom")
        assert _translate.made_here(MCPError(-32000, sample), "call", alive=True), text
    assert not _translate.made_here(MCPError(-32000, "record not found"), "call", alive=True)
