"""A large tool result through `agent-sdk serve` peaks under twice its size and goes back after (issue #23).

`agent-sdk serve` (a subprocess, default settings) with one advertised connection to our counting
server (the Python SDK's FastMCP): over stdio, over Streamable HTTP at 2026-07-28 and at the
handshake (JSON answers). A peer posts `tools/call` `big(size)` on `/v1/mcp/tools`: a text of
`size` bytes, sent twice (content and structured content, checked against the tool's output
schema). The gateway's peak RSS (`VmHWM`, reset through `/proc/PID/clear_refs` before the call)
above its idle RSS is compared with the answer's size; its RSS half a second after the call with
idle. Before #23's third round every path peaked at 2.0-2.2x (the answer's bytes and its objects
whole at once, then `to_json` of each content item beside the objects).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.gateway.conftest import Served, serving
from tests.memory import COUNTING, counting_http, reset_peak, status_bytes

SIZE = 3 * 1024 * 1024
PEAK = 1.8
"""Peak above idle over the answer: the objects (1x) and one long string's bytes while it is read or written."""
AFTER = 0.25
"""RSS above idle after the call, over the answer."""
HANDSHAKE, MODERN = "2025-11-25", "2026-07-28"

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")


@pytest.fixture(scope="module")
def counting() -> Iterator[str]:
    with counting_http() as url:
        yield url


def definition(path: str, upstream: str) -> str:
    if path == "stdio":
        how = f"command={sys.executable!r}, args=[{str(COUNTING)!r}, 'stdio']"
    else:
        how = f"url={upstream!r}, protocol={'modern' if path == 'http 2026-07-28' else 'legacy'!r}"
    return f"from connections import define_connection\n\nconnection = define_connection({how}, advertise_tools=True)\n"


def call_big(served: Served, size: int, version: str) -> int:
    """`tools/call` big(size) as a peer at `version`; the answer's size in bytes."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": version}
    params: dict[str, object] = {"name": "big", "arguments": {"size": size}}
    if version == MODERN:  # no handshake: the envelope and the routing headers on every request
        headers |= {"mcp-method": "tools/call", "mcp-name": "big"}
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    response = httpx2.post(f"{served.url}/v1/mcp/tools", json=body, headers=headers, timeout=120)
    assert response.status_code == 200, response.text[:500]
    result = response.json()["result"]
    assert not result.get("isError"), str(result)[:500]
    assert len(result["content"][0]["text"]) == size
    assert len(result["structuredContent"]["result"]) == size
    return len(response.content)


@pytest.mark.parametrize(
    ("path", "version"),
    [("stdio", HANDSHAKE), ("http 2026-07-28", HANDSHAKE), ("http handshake", HANDSHAKE), ("stdio", MODERN)],
)
def test_a_large_result_peaks_under_twice_its_size_and_goes_back(
    tmp_path_factory: pytest.TempPathFactory, counting: str, path: str, version: str
) -> None:
    with serving(tmp_path_factory, "large", {"big": definition(path, counting)}) as served:
        pid = served.proc.pid
        for _ in range(2):
            call_big(served, 10, version)  # the session, the listing, the output schema
        time.sleep(0.5)
        idle = status_bytes(pid, "VmRSS")
        reset_peak(pid)
        payload = call_big(served, SIZE, version)
        peak = status_bytes(pid, "VmHWM") - idle
        time.sleep(0.5)
        after = status_bytes(pid, "VmRSS") - idle
    print(f"{path}, peer at {version}: peak {peak / payload:.2f}x, after {after / 2**20:.1f} MB")  # shown with -s
    assert peak / payload < PEAK, f"{path}, peer at {version}: peak {peak / payload:.2f}x the answer"
    assert after / payload < AFTER, f"{path}, peer at {version}: {after / 2**20:.1f} MB above idle after the call"
