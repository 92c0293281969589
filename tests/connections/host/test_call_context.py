"""A call's context through the pool, on every wire: progress, log messages and cancellation reach
host code (`host.mcp.call_tool(on_progress=, on_log=)`) from a real upstream of each generation.

The upstream is `tests/fixtures/upstreams/patient_server.py` (`mcp` 2.x): over Streamable HTTP with
the fast wire and with the SDK transport, pinned to each generation, and over stdio (the SDK's
dispatcher). It records what it saw: the calls it was sent (with their `_meta`), each cancellation.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as mt
import pytest

from connections import ClientPool, ConnectionDefinition, HostMcp, define_connection
from tests.conftest import free_port
from tests.processes import running

pytestmark = pytest.mark.anyio

PATIENT = Path(__file__).resolve().parents[2] / "fixtures" / "upstreams" / "patient_server.py"
LEGS = [
    ("http", "legacy", True),
    ("http", "legacy", False),
    ("http", "modern", True),
    ("http", "modern", False),
    ("stdio", "legacy", False),
    ("stdio", "modern", False),
]


@pytest.fixture(scope="module")
def patient_url() -> Iterator[str]:
    port = free_port()
    with running([sys.executable, str(PATIENT), "--port", str(port)], port=port, what="patient upstream"):
        yield f"http://127.0.0.1:{port}/mcp"


class Leg:
    """One way to reach the patient upstream, and what it saw."""

    def __init__(self, url: str, transport: str, protocol: str, fast: bool, record: Path) -> None:
        self.url, self.fast, self.record = url, fast, record
        if transport == "http":
            self.defn = define_connection(url=url, protocol=protocol, min_log_level="info")
        else:
            args = [str(PATIENT), "--stdio", str(record)]
            self.defn = define_connection(command=sys.executable, args=args, protocol=protocol, min_log_level="info")
        self.stdio = transport == "stdio"

    def named(self) -> dict[str, ConnectionDefinition]:
        return {"patient": self.defn.named("patient", None)}

    def seen(self) -> list[dict[str, Any]]:
        if self.stdio:
            text = self.record.read_text() if self.record.exists() else ""
            return [json.loads(line) for line in text.splitlines()]
        return httpx2.get(self.url.replace("/mcp", "/seen")).json()


async def _until(condition: Callable[[], bool]) -> None:
    """Poll the upstream's record (another process) until `condition` holds; the caller bounds the wait."""
    while True:
        if condition():
            return
        await anyio.sleep(0.05)


@pytest.fixture(params=LEGS, ids=lambda leg: "-".join(str(x) for x in leg))
def leg(request: pytest.FixtureRequest, patient_url: str, tmp_path: Path) -> Leg:
    transport, protocol, fast = request.param
    return Leg(patient_url, transport, protocol, fast, tmp_path / "seen.jsonl")


async def test_host_code_hears_progress_and_log_messages_on_every_wire(leg: Leg) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[mt.LoggingMessageNotificationParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with ClientPool(leg.named(), fast_calls=leg.fast) as pool:
        host = HostMcp(pool)
        with anyio.fail_after(30):
            result = await host.call_tool(
                "patient", "steps", {}, on_progress=on_progress, on_log=on_log, log_level="debug"
            )
            plain = await host.call_tool("patient", "steps", {})
    assert result.content[0].text == "done" and plain.content[0].text == "done"  # pyright: ignore[reportAttributeAccessIssue]
    assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    # debug is under the connection's `min_log_level="info"`
    assert [(m.level, m.data) for m in logs] == [
        ("info", {"said": "info"}),
        ("warning", {"said": "warning"}),
        ("error", {"said": "error"}),
    ]
    calls = [e for e in leg.seen() if e.get("call") == "steps"][-2:]
    assert "progressToken" in calls[0]["meta"] and "progressToken" not in calls[1]["meta"]
    if leg.defn.protocol == "modern":  # the level travels with the request, raised to the connection's cap
        assert calls[0]["meta"]["io.modelcontextprotocol/logLevel"] == "info"
        assert "io.modelcontextprotocol/logLevel" not in calls[1]["meta"]
    else:  # the session's level, set once
        assert {"setLevel": "info"} in leg.seen()


async def test_a_host_caller_that_cancels_its_task_cancels_the_upstream_call(leg: Leg) -> None:
    async with ClientPool(leg.named(), fast_calls=leg.fast) as pool:
        host = HostMcp(pool)
        await host.list_tools("patient")  # opened: the count below starts after the session's own requests
        before = len(leg.seen())
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.call_tool, "patient", "hang", {})
                await _until(lambda: any(e.get("call") == "hang" for e in leg.seen()[before:]))
                tg.cancel_scope.cancel()
            await _until(lambda: any("cancelled" in e for e in leg.seen()[before:]))
    started = next(e for e in leg.seen()[before:] if e.get("call") == "hang")
    # a handshake upstream and stdio are told with `notifications/cancelled`; a 2026-07-28 one over HTTP has
    # its POST closed
    by = "closed" if leg.defn.protocol == "modern" and not leg.stdio else "notification"
    cancelled = [e for e in leg.seen()[before:] if "cancelled" in e]
    assert cancelled == [{"cancelled": "hang", "id": started["id"], "by": by}]


async def test_one_callers_log_messages_never_reach_another_caller_on_a_shared_session(leg: Leg) -> None:
    """Caller A waits on `hang` with `on_log` while caller B (no callbacks) runs `steps`, which logs.
    Over stdio and the SDK transport a log message names no request; the only caller that asked for
    logs is A, yet B's lines must not reach it."""
    heard: list[mt.LoggingMessageNotificationParams] = []

    async def on_log(params: mt.LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with ClientPool(leg.named(), fast_calls=leg.fast) as pool:
        host = HostMcp(pool)
        await host.list_tools("patient")
        before = len(leg.seen())
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: host.call_tool("patient", "hang", {}, on_log=on_log, log_level="debug"))
                await _until(lambda: any(e.get("call") == "hang" for e in leg.seen()[before:]))
                result = await host.call_tool("patient", "steps", {})
                assert result.content[0].text == "done"  # pyright: ignore[reportAttributeAccessIssue]
                tg.cancel_scope.cancel()
    assert heard == []
