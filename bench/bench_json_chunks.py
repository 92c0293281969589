"""Parsing a large answer that arrives in 64 KiB chunks: joined then `from_json` (before) against `JsonChunks`.

    .venv/bin/python bench/bench_json_chunks.py            # ~10 s

Three 5 MB answers: two plain texts (a tool's content and structured content), the same with
escapes and non-ASCII text on every few characters, and 100,000 small content items. For each, the
time to parse (best of 5) and the peak RSS above the RSS before (`VmHWM`, reset through
`/proc/self/clear_refs`), each in a fresh process, as a multiple of the answer, not counting the
answer itself (held by the bench throughout): "joined" keeps every chunk until the join, as a
reader of the whole body does; `JsonChunks` is handed them one by one, as a socket hands them.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pydantic_core

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections.client._transports._json_chunks import JsonChunks  # noqa: E402
from gateway.commands.memory import return_large_blocks  # noqa: E402

CHUNK = 65536
MB = 1024 * 1024


def rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def answers() -> dict[str, bytes]:
    plain = "x" * (5 * MB // 2)
    escaped = 'ab"\\é\n' * (5 * MB // 14)
    items = [{"type": "text", "text": f"item {i}"} for i in range(100_000)]

    def tool(text: str) -> bytes:
        result = {"content": [{"type": "text", "text": text}], "structuredContent": {"result": text}}
        return json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=False).encode()

    small = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": items}}).encode()
    return {"two plain texts": tool(plain), "two escaped texts": tool(escaped), "100,000 small items": small}


def joined(data: bytes) -> Any:
    parts = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    body = b"".join(parts)
    parts.clear()
    return pydantic_core.from_json(body)


def chunked(data: bytes) -> Any:
    parts = JsonChunks()
    for i in range(0, len(data), CHUNK):
        parts.feed(data[i : i + CHUNK])
    return parts.finish()


def measure(parse: Any, data: bytes) -> tuple[float, float]:
    best = float("inf")
    peak = 0.0
    for _ in range(5):
        gc.collect()
        before = rss("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
        start = time.perf_counter()
        value = parse(data)
        best = min(best, time.perf_counter() - start)
        peak = max(peak, (rss("VmHWM") - before) / len(data))
        del value
    return best * 1000, peak


def one(name: str, how: str) -> None:
    """One measurement in this (fresh) process: a freed heap is reused, so each gets its own."""
    return_large_blocks()
    data = answers()[name]
    ms, peak = measure(joined if how == "joined" else chunked, data)
    print(json.dumps({"ms": ms, "peak": peak, "mb": len(data) / MB}))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3])
        return
    print(
        "| answer | MB | joined + from_json: ms | JsonChunks: ms | joined: peak / answer | JsonChunks: peak / answer |"
    )
    print("|---|---|---|---|---|---|")
    for name in answers():
        a, b = (
            json.loads(
                subprocess.run([sys.executable, __file__, "--one", name, how], capture_output=True, check=True).stdout
            )
            for how in ("joined", "chunks")
        )
        print(f"| {name} | {a['mb']:.1f} | {a['ms']:.1f} | {b['ms']:.1f} | {a['peak']:.2f}x | {b['peak']:.2f}x |")


if __name__ == "__main__":
    main()
