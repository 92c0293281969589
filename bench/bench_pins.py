"""What `mcp.lock` costs: checking one listing against it (once per new listing) and a toolset built
again from the same listing (the guard's memo), for listings of 10, 100 and 1000 tools.

    .venv/bin/python bench/bench_pins.py [--repeat 200]

In-process and upstream-free: the tools are `mcp.types.Tool` objects shaped as an `mcp` 2.x server
lists them (a description, an input schema of three properties, an output schema, annotations), the
lock is written by `lock_of` for them. A call is not measured: no code on a call's path reads the lock
(the tools a listing holds back are decided when the listing is checked).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import mcp.types as mt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connections import define_connection  # noqa: E402
from connections.project._pins import canonical_definition  # noqa: E402  # pyright: ignore[reportPrivateUsage]
from connections.serving import PinGuard, lock_of, write_lock  # noqa: E402


def tools(count: int) -> list[mt.Tool]:
    schema = {
        "type": "object",
        "properties": {name: {"type": "string", "title": name.title()} for name in ("query", "scope", "cursor")},
        "required": ["query"],
    }
    return [
        mt.Tool(
            name=f"tool_{i}",
            description=f"Tool number {i}: searches the thing and returns what it found, at most 50 results.",
            input_schema=schema,
            output_schema={"type": "object", "properties": {"result": {"type": "string"}}},
            annotations=mt.ToolAnnotations(read_only_hint=True),
        )
        for i in range(count)
    ]


def median_us(run: object, repeat: int) -> float:
    times: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    defn = define_connection(command="x", advertise_tools=True).named("c", None)
    print(f"{'tools':>6} {'first check us':>15} {'per tool us':>12} {'same listing us':>16}")
    for count in (10, 100, 1000):
        listing = tools(count)
        found = {"c": {"tools": {t.name: canonical_definition(t) for t in listing}}}
        for kind in ("resources", "resourceTemplates", "prompts"):
            found["c"][kind] = {}
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "mcp.lock"
            write_lock(path, lock_of(found, None))  # type: ignore[arg-type]
            guard = PinGuard(path)

            def first(guard: PinGuard = guard, listing: list[mt.Tool] = listing) -> None:
                guard._memo.clear()  # pyright: ignore[reportPrivateUsage]  # a new listing each time
                assert guard.verdict(defn, listing).clean

            def again(guard: PinGuard = guard, listing: list[mt.Tool] = listing) -> None:
                assert guard.verdict(defn, listing).clean

            fresh = median_us(first, max(5, args.repeat // (count // 10)))
            again()
            memo = median_us(again, args.repeat)
        print(f"{count:>6} {fresh:>15.0f} {fresh / count:>12.1f} {memo:>16.1f}")


if __name__ == "__main__":
    main()
