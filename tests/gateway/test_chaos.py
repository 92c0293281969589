"""The short chaos run (`bench/chaos.py`, docs/deploy.md "Failure figures"): three `serve --state-url`
replicas behind nginx running `deploy/nginx.conf`, a real `redis-server`, server-everything over stdio and
an `mcp` 2.x upstream over HTTP; MCP peers of both generations calling (long calls with progress), a
session-API user running turns and reading its event stream, a `subscriptions/listen` stream, tasks.
One of each fault, one at a time: `kill -9` of a replica and its restart, a 4 s `SIGSTOP`, a Redis
restart, the stdio child killed.

The goal: the only failed requests were in flight on what a fault struck, each with an error a peer can
act on (nginx's 502, a 503, a sentence that says retry or reopen); no session, turn event or task lost or
duplicated; every task ends, none stays `working`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from chaos import SHORT_SCHEDULE, chaos, check  # noqa: E402  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.timeout(300)]


async def test_only_calls_in_flight_on_a_struck_replica_fail_and_nothing_is_lost(tmp_path: Path) -> None:
    report = await chaos(tmp_path, SHORT_SCHEDULE, 0, sequential=True, peers=6, users=1, listeners=1, tasks=2)
    assert check(report) == [], report
    struck = {f["fault"]: f for f in report["faults"]}
    assert len(struck) == 4 and all(f["attempted"] > 0 and f["succeeded"] > 0 for f in struck.values()), struck
    assert report["sessions"]["acknowledged"] > 0 and report["turns"].get("completed", 0) > 0
    assert report["progress_notifications"] > 0
    assert report["tasks"] and set(report["tasks"]) <= {"completed", "failed"}, report["tasks"]
