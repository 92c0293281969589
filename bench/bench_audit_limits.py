"""What the audit trail and the rate limits cost per tool call: the gateway's CPU for `CallGuard.run`
around a call that does nothing, against the same call unguarded (docs/performance.md).

    .venv/bin/python bench/bench_audit_limits.py [--calls 20000] [--redis redis://127.0.0.1:6379/0]

Scenarios: the audit record alone (no `agent/limits.toml`); the record and one in-process limit that
applies to the call; with `--redis`, the record and one limit on Redis (the `limits` package's moving
window, one Lua script a call). The writer task's work (the JSON line, the file append) is counted:
the trail is drained before the clock stops. CPU is `time.process_time` of this process (a Redis
server's own CPU is not in it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
import limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.approvals import ApprovalGate  # noqa: E402
from gateway.audit import AuditTrail, CallGuard, FileSink  # noqa: E402
from gateway.limits import Limiter, LimitRule, limits_storage  # noqa: E402


async def _nothing() -> int:
    return 0


def _ok(_result: int) -> bool:
    return False


async def _measure(calls: int, rules: tuple[LimitRule, ...], storage_url: str | None, folder: Path) -> float:
    """µs of CPU per call that the guard adds."""
    async with AuditTrail.running([FileSink(folder, max_bytes=1 << 30)], capacity=calls + 1000) as trail:
        guard = CallGuard(trail, Limiter(rules, limits_storage(storage_url)), ApprovalGate({}))
        for _ in range(200):  # warm up (and the first Redis connection)
            await guard.run("echo", "everything", "http", "bearer:bench", {}, _nothing, _ok)
        bare = time.process_time()
        for _ in range(calls):
            await _nothing()
        bare = time.process_time() - bare
        started = time.process_time()
        for _ in range(calls):
            await guard.run("echo", "everything", "http", "bearer:bench", {"message": "hi"}, _nothing, _ok)
    guarded = time.process_time() - started  # the trail drained on exit: its writes are counted
    return (guarded - bare) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--redis", default=None, help="a Redis URL for the shared-limit scenario")
    args = parser.parse_args()
    rule = LimitRule(0, "1000000000/minute", limits.parse("1000000000/minute"), ("principal", "tool"))
    scenarios: list[tuple[str, tuple[LimitRule, ...], str | None]] = [
        ("audit record only", (), None),
        ("audit + one in-process limit", (rule,), None),
    ]
    if args.redis:
        scenarios.append(("audit + one limit on Redis", (rule,), args.redis))
    for name, rules, url in scenarios:
        with tempfile.TemporaryDirectory() as tmp:
            calls = args.calls if url is None else max(1000, args.calls // 10)
            cost = anyio.run(_measure, calls, rules, url, Path(tmp))
        print(f"{name:32s} {cost:7.1f} µs CPU per call ({calls} calls)")


if __name__ == "__main__":
    main()
