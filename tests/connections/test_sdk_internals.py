"""The private parts of `mcp` and `httpx2` the fast wire stands on are where it expects.

The fast wire is `connections/_fast_calls.py` and `_fast_answers.py`.

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
from mcp.server.mcpserver import MCPServer

from connections import _fast_answers

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


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
