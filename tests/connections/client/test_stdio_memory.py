"""Reading a long stdio answer line of one long text costs at most the text's bytes and its string (issue #23).

A real child writes one 8 MB JSON-RPC answer on one line; a fresh Python process reads it through
`stdio_transport` and reports its peak RSS (`VmHWM`, reset through `/proc/self/clear_refs` just
before the read) above its RSS before, as a multiple of the line. Before the line was grown in an
`io.BytesIO`, `pydantic_core.from_json` copied the `bytearray` it was grown in: three times the
line at the parse. (A line of two long texts peaks lower: `tests/connections/client/test_result_memory.py`.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SIZE = 8 * 1024 * 1024

_CHILD = textwrap.dedent(
    """
    import sys
    text = "x" * int(sys.argv[1])
    sys.stdout.write('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"' + text + '"}]}}\\n')
    sys.stdout.flush()
    sys.stdin.read()
    """
)

_READER = textwrap.dedent(
    """
    import json, os, sys, anyio
    from connections.client._transports._stdio import stdio_transport
    from gateway.commands.memory import return_large_blocks
    from tests.memory import reset_peak, status_bytes as status

    async def main():
        return_large_blocks()  # as `serve` does
        child, size = sys.argv[1], int(sys.argv[2])
        before = status("self", "VmRSS")
        reset_peak("self")
        async with stdio_transport(sys.executable, ["-c", child, str(size)], env=dict(os.environ), cwd=None,
                                   errlog=None, on_spawn=lambda _: None) as (read, write):
            message = await read.receive()
            peak = status("self", "VmHWM")
            text = message.message.result["content"][0]["text"]
            print(json.dumps({"peak": peak - before, "length": len(text)}))
            await write.aclose()

    anyio.run(main)
    """
)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_long_answer_line_peaks_at_the_line_and_its_objects() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _READER, _CHILD, str(SIZE)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=120,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["length"] == SIZE
    line = SIZE + 80
    ratio = report["peak"] / line
    assert ratio < 2.4, f"peak {ratio:.2f}x the line"
