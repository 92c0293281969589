"""Chaos under load: replicas killed and stopped, Redis restarted, a stdio child killed, peers calling.

    .venv/bin/python bench/chaos.py [--seconds 90] [--peers 32] [--users 4] [--json out.json]

The deployment (`bench/chaos_cluster.py`): Redis, nginx with the shipped `deploy/nginx.conf`, three
`agent-sdk serve --state-url` replicas, server-everything over stdio and an `mcp` 2.x upstream over
HTTP. The load (`bench/chaos_load.py`): MCP peers of both generations (some long calls with progress),
session-API users running turns and reading their event streams, `subscriptions/listen` streams and
tasks. The faults, on a schedule (`SCHEDULE`): `kill -9` of a replica every 15 s and its restart, one
`SIGSTOP` of a replica for 10 s, a Redis restart, server-everything's stdio child killed.

Printed per fault: requests attempted while it lasted, succeeded, failed, and of the failures how many
were in flight on the replica (or child) it struck; the error each failed peer saw; then sessions,
turn events, tasks and subscriptions lost or duplicated; and the time until every replica answered
again. `check(report)` holds the goal (docs/deploy.md, "Failure figures"): the only failed requests
are those in flight on what the fault struck, each with an error a peer can act on; nothing lost or
duplicated; every task ends, none stays `working`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_cluster import Cluster, LogLine, cluster, read_access_log, wait_until
from chaos_load import RETRYABLE, Load, Op, run_load

from tests.gateway.replicas import BEARER

__all__ = ["SCHEDULE", "SHORT_SCHEDULE", "Fault", "chaos", "check"]

STATE_KINDS = {"session.create", "session.follow"}
STDIO_KINDS = {"long", "task.start", "task.get"}


@dataclass
class Fault:
    kind: str
    """`kill` (kill -9, then start it again), `stop` (SIGSTOP for `hold` s), `redis` (kill -9 Redis, start
    it again after `hold` s), `child` (kill -9 the replica's stdio child)."""
    at: float
    target: int = 0
    hold: float = 0.0
    struck: float = 0.0
    """When it struck (epoch seconds, the clock nginx logs with)."""
    healthy_s: float = 0.0
    """Seconds from the strike until every replica answered again (`/v1/ready` after a Redis restart)."""
    restart_s: float = 0.0
    """A killed replica's start again, until it answered `/v1/health`."""
    restart_cpu_s: float = 0.0
    """The CPU seconds that start used (wall time is this times the box's contention)."""
    starts: int = 0
    """How many starts that took (more than 1: a start exited, e.g. Redis was down at its boot)."""

    @property
    def name(self) -> str:
        what = {
            "kill": "kill -9 replica",
            "stop": "SIGSTOP replica",
            "redis": "restart Redis",
            "child": "kill stdio child",
        }
        return f"{what[self.kind]}{'' if self.kind == 'redis' else f' r{self.target}'} at {self.at:g}s"


SCHEDULE = [
    Fault("kill", 8, 0),
    Fault("stop", 14, 2, hold=10),
    Fault("kill", 23, 1),
    Fault("kill", 38, 2),
    Fault("redis", 45, hold=3),
    Fault("kill", 53, 0),
    Fault("child", 60, 2),
    Fault("kill", 68, 1),
    Fault("kill", 83, 2),
]
"""90 s: a replica `kill -9`ed every 15 s and started again, one SIGSTOP for 10 s, Redis, a stdio child."""
SHORT_SCHEDULE = [Fault("kill", 2, 0), Fault("stop", 1, 1, hold=4), Fault("redis", 1, hold=2), Fault("child", 1, 2)]
"""The test suite's short run (tests/gateway/test_chaos.py): each kind of fault once, one at a time (`sequential`:
each `at` seconds after the one before it healed), so that a slow restart on a loaded box never overlaps the next."""


async def _strike(c: Cluster, fault: Fault, t0: float) -> None:
    await anyio.sleep(max(0.0, t0 + fault.at - time.monotonic()))
    fault.struck = time.time()
    if fault.kind == "kill":
        c.kill(fault.target)
        try:
            fault.restart_s, fault.restart_cpu_s, fault.starts = await anyio.to_thread.run_sync(c.restart, fault.target)
        except RuntimeError:  # reported: the replica stays down, the others carry the load
            fault.restart_s = float("inf")
    elif fault.kind == "stop":
        c.pause(fault.target, True)
        await anyio.sleep(fault.hold)
        c.pause(fault.target, False)
    elif fault.kind == "redis":
        c.redis.kill()
        await anyio.sleep(fault.hold)
        await anyio.to_thread.run_sync(c.redis.start)
    elif not c.kill_stdio_child(fault.target):
        fault.kind, fault.healthy_s = "child", float("nan")  # nothing to kill: reported, not counted
        return
    ready = fault.kind == "redis"
    waited = await anyio.to_thread.run_sync(lambda: wait_until(lambda: c.all_healthy(ready=ready), 60))
    fault.healthy_s = time.time() - fault.struck if waited < 60 else float("inf")


async def chaos(
    folder: Path,
    schedule: list[Fault],
    seconds: float,
    *,
    sequential: bool = False,
    keep: Path | None = None,
    **load_sizes: int,
) -> dict[str, Any]:
    """Run the load for `seconds` (with `sequential`, until 2 s after the last fault healed) with the faults of
    `schedule`; the report (see `check`)."""
    with cluster(folder) as c:
        try:
            return await _run(c, schedule, seconds, sequential, load_sizes)
        finally:
            if keep is not None:
                _keep(c, keep)


async def _run(
    c: Cluster, schedule: list[Fault], seconds: float, sequential: bool, load_sizes: dict[str, int]
) -> dict[str, Any]:
    load = Load(BEARER)
    limits = httpx2.Limits(max_connections=256, max_keepalive_connections=128)
    headers = {"Authorization": f"Bearer {BEARER}"}
    async with httpx2.AsyncClient(base_url=c.front, headers=headers, timeout=60, limits=limits) as http:
        for _ in range(6):  # each replica starts its stdio child once before the clock starts
            await http.get("/v1/tools")
        t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: run_load(http, load, **load_sizes))
            if sequential:
                for fault in schedule:
                    await _strike(c, fault, time.monotonic())
                seconds = time.monotonic() - t0 + 2.0
            else:
                async with anyio.create_task_group() as faults:
                    for fault in schedule:
                        faults.start_soon(_strike, c, fault, t0)
            await anyio.sleep(max(0.0, t0 + seconds - time.monotonic()))
            load.stop = True
        final = await _final_state(http, load)
    log = read_access_log(c.access_log)
    report = _report(c, schedule, load, final, log)
    report["replica_logs_clean"] = all("Traceback" not in s.log_text() for s in c.replicas)
    return report


def _keep(c: Cluster, keep: Path) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(c.access_log, keep / "access.log")
    for log in c.folder.glob("serve-*.log"):
        shutil.copy(log, keep / log.name)


async def _final_state(http: httpx2.AsyncClient, load: Load) -> dict[str, dict[str, Any]]:
    """Every acknowledged session once no turn runs (a lapsed lease is closed within its length + 1 s)."""
    sessions: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(60):
        for sid in list(load.sessions):
            while True:
                response = await http.get(f"/v1/session/{sid}")
                if response.status_code == 200 and response.json()["status"] != "running":
                    break
                if response.status_code == 404:
                    break
                await anyio.sleep(0.25)
            if response.status_code != 200:
                continue
            events = (await http.get(f"/v1/session/{sid}/events", params={"format": "json"})).json()["events"]
            sessions[sid] = {"snapshot": response.json(), "events": events}
    return sessions


def _struck_by(fault: Fault, op: Op, line: LogLine | None, ports: list[int]) -> bool:
    """Whether `op` was in flight on what `fault` struck (nginx's log says where it went)."""
    if fault.kind == "redis":
        uses_redis = op.kind in STATE_KINDS or "state store is unavailable" in op.error  # a task asked of its owner
        return uses_redis and fault.struck - 0.1 <= op.ended <= fault.struck + fault.healthy_s + 0.5
    if fault.kind == "stop" and "did not answer within" in op.error:  # a task follow-up asked of the stopped owner
        return fault.struck - 0.05 <= op.ended and op.started <= fault.struck + fault.hold
    if line is None or not line.upstreams or ports[fault.target] != line.upstreams[-1]:
        return False
    if fault.kind == "child" and op.kind not in STDIO_KINDS:
        return False
    until = fault.struck + (fault.hold if fault.kind == "stop" else 0.05)
    return line.started <= until and line.ended >= fault.struck - 0.05


def _report(
    c: Cluster, schedule: list[Fault], load: Load, final: dict[str, dict[str, Any]], log: dict[str, LogLine]
) -> dict[str, Any]:
    # A task's follow-up that reached another replica than the one whose upstream session made it: a
    # documented limit (docs/http-api.md, tasks), counted with the tasks, not as a fault's failure.
    elsewhere = [op for op in load.ops if op.kind == "task.get" and op.error and "-32602" in op.error]
    skip = {op.ident for op in elsewhere}
    failed = [op for op in load.ops if op.error and op.ident not in skip]
    explained: set[str] = set()
    faults: list[dict[str, Any]] = []
    for fault in schedule:
        end = fault.struck + max(fault.healthy_s, fault.hold) + 1.0
        during = [
            op
            for op in load.ops
            if op.ident not in skip and op.started <= end and (op.ended or time.time()) >= fault.struck
        ]
        struck = [op for op in failed if _struck_by(fault, op, log.get(op.ident), c.ports)]
        explained |= {op.ident for op in struck}
        faults.append(
            {
                "fault": fault.name,
                "attempted": len(during),
                "succeeded": sum(1 for op in during if not op.error),
                "failed": sum(1 for op in during if op.error),
                "failed_in_flight_on_struck": len(struck),
                "errors": dict(Counter(f"{op.kind}: {op.error[:90]}" for op in struck)),
                "not_actionable": [op.error for op in struck if not any(hint in op.error for hint in RETRYABLE)],
                "healthy_after_s": round(fault.healthy_s, 2),
                **(
                    {
                        "restart_s": round(fault.restart_s, 2),
                        "restart_cpu_s": round(fault.restart_cpu_s, 2),
                        "starts": fault.starts,
                    }
                    if fault.kind == "kill"
                    else {}
                ),
            }
        )
    unexplained = [op for op in failed if op.ident not in explained]
    t0 = min((op.started for op in load.ops), default=0.0)

    def where(op: Op) -> str:
        line = log.get(op.ident)
        if line is None:
            return f"{op.kind} at {op.started - t0:.1f}s: not in nginx's log: {op.error[:80]}"
        tried = ",".join(f"r{c.ports.index(p)}" for p in line.upstreams if p in c.ports) or "none"
        span = f"{line.started - t0:.1f}-{line.ended - t0:.1f}s"
        return f"{op.kind} {span} tried {tried}: {op.error[:200]}"

    lost = [sid for sid in load.sessions if sid not in final]
    gaps = [sid for sid, s in final.items() if [e["index"] for e in s["events"]] != list(range(len(s["events"])))]
    mismatched = [
        sid for sid, s in final.items() if s["events"][: len(load.seen.get(sid, []))] != load.seen.get(sid, [])
    ]
    endings: Counter[str] = Counter()
    for turn, sid in load.turns.items():
        events = final.get(sid, {}).get("events", [])
        closes = [e for e in events if e.get("turnId") == turn and e["type"] in ("turn.completed", "turn.failed")]
        endings[
            "never closed" if not closes else "closed twice" if len(closes) > 1 else closes[0]["data"]["status"]
        ] += 1
    listens = Counter("ok" if not op.error else op.error[:60] for op in load.listens)
    return {
        "faults": faults,
        "requests": {"attempted": len(load.ops), "failed": len(failed)},
        "unexplained_failures": dict(Counter(f"{op.kind}: {op.error[:120]}" for op in unexplained)),
        "unexplained_detail": [where(op) for op in unexplained[:40]],
        "faults_at": {f.name: round(f.struck - t0, 2) for f in schedule},
        "sessions": {"acknowledged": len(load.sessions), "lost": len(lost)},
        "events": {
            "total": sum(len(s["events"]) for s in final.values()),
            "gaps_or_duplicates": len(gaps),
            "reader_mismatches": len(mismatched),
            "resumes": load.resumes,
            "bad_resumes": load.bad_resumes,
            "readers_gave_up": load.gave_up,
        },
        "turns": dict(endings),
        "task_follow_ups_unknown_elsewhere": len(elsewhere),
        "tasks": dict(
            Counter(v.split(": ", 1)[0] if not v.startswith("error") else v[:140] for v in load.tasks.values())
        ),
        "subscriptions": {"opened": len(load.listens), "ended": dict(listens)},
        "progress_notifications": sum(op.progress for op in load.ops if op.kind == "long"),
        "grants": "none held: the project has no OAuth connection",
    }


def check(report: dict[str, Any]) -> list[str]:
    """What breaks the goal (empty: met)."""
    problems: list[str] = []
    if report["unexplained_failures"]:
        problems.append(f"failures not in flight on a struck replica: {report['unexplained_failures']}")
    for fault in report["faults"]:
        for error in fault["not_actionable"]:
            problems.append(f"{fault['fault']}: an error a peer cannot act on: {error}")
        if fault["healthy_after_s"] == float("inf"):
            problems.append(f"{fault['fault']}: the replicas never all answered again")
    if report["sessions"]["lost"]:
        problems.append(f"sessions lost: {report['sessions']}")
    events = report["events"]
    if events["gaps_or_duplicates"] or events["reader_mismatches"] or events["bad_resumes"]:
        problems.append(f"events lost or duplicated: {events}")
    if set(report["turns"]) - {"completed", "interrupted"}:
        problems.append(f"turns: {report['turns']}")
    if report["tasks"].get("working"):
        problems.append(f"tasks left working: {report['tasks']}")
    if not report["replica_logs_clean"]:
        problems.append("a replica logged a traceback")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--peers", type=int, default=32)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--listeners", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--keep", type=Path, help="copy nginx's access log and the replicas' logs into this folder")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="chaos-") as tmp:
        report = anyio.run(
            lambda: chaos(
                Path(tmp),
                SCHEDULE,
                args.seconds,
                peers=args.peers,
                users=args.users,
                listeners=args.listeners,
                keep=args.keep,
                tasks=args.tasks,
            )
        )
    report["load_generator_cpu_s"] = round(time.process_time(), 1)  # this process: the peers, the faults, the report
    report["load_average"] = {
        "before": [round(x, 2) for x in load_before],
        "after": [round(x, 2) for x in os.getloadavg()],
    }
    report["problems"] = check(report)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text)
    sys.exit(1 if report["problems"] else 0)


if __name__ == "__main__":
    main()
