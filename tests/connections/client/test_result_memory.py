"""A large tool result costs less than twice its size in the pool, on stdio and both HTTP generations (issue #23).

Our counting server (the Python SDK's FastMCP) answers `big(size)` with a text of `size` bytes,
sent twice: as content and as structured content (checked against the tool's output schema). A
fresh Python process calls it through a `ClientPool` and reports its peak RSS (`VmHWM`, reset
through `/proc/self/clear_refs` just before the call) above its RSS before, as a multiple of the
answer's size on the wire. Reading the whole answer and then parsing it held the bytes and the
objects at once (2.0-2.1x); the readers now parse the answer as it arrives (`JsonChunks`), so
only the long string being read is held as bytes beside the objects.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.memory import COUNTING, counting_http

ROOT = Path(__file__).resolve().parents[3]
SIZE = 4 * 1024 * 1024
LIMIT = 1.8
"""Peak over payload; the objects alone are 1.0x, one long literal's bytes 0.5x more."""

_CALLER = textwrap.dedent(
    """
    import json, sys, anyio
    from connections import ClientPool, define_connection
    from gateway.commands.memory import return_large_blocks
    from tests.memory import reset_peak, status_bytes as status

    async def main():
        return_large_blocks()  # as `serve` does
        how, size = json.loads(sys.argv[1]), int(sys.argv[2])
        defn = define_connection(**how).named("big", None)
        async with ClientPool({"big": defn}) as pool:
            await pool.call_tool("big", "big", {"size": 10})  # the session, the listing, the schema
            before = status("self", "VmRSS")
            reset_peak("self")
            result = await pool.call_tool("big", "big", {"size": size})
            peak = status("self", "VmHWM")
            print(json.dumps({"peak": peak - before, "text": len(result["content"][0]["text"]),
                              "structured": len(result["structuredContent"]["result"])}))

    anyio.run(main)
    """
)


@pytest.fixture(scope="module")
def counting() -> Iterator[str]:
    with counting_http() as url:
        yield url


def peak_over_payload(how: dict[str, object]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _CALLER, json.dumps(how), str(SIZE)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    report = json.loads(done.stdout)
    assert report["text"] == report["structured"] == SIZE
    return report["peak"] / (2 * SIZE)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_large_stdio_answer_peaks_under_twice_its_size() -> None:
    ratio = peak_over_payload({"command": sys.executable, "args": [str(COUNTING), "stdio"]})
    assert ratio < LIMIT, f"peak {ratio:.2f}x the answer"


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_a_large_http_answer_peaks_under_twice_its_size(counting: str, protocol: str) -> None:
    ratio = peak_over_payload({"url": counting, "protocol": protocol})
    assert ratio < LIMIT, f"peak {ratio:.2f}x the answer"
