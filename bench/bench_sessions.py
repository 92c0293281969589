"""Sessions cost by what is asked: 100 against 10,000 stored sessions, and a follow-up on a long conversation.

    .venv/bin/python bench/bench_sessions.py            # 0, 100 and 10,000 sessions; 1,000-turn conversation

Sessions are written into a state root in process, through the file store the gateway uses (a record
and a one-turn event log each, as a real session leaves them), then `agent-sdk serve` (default
settings, the deterministic runner) starts on that state root. Measured: start to a 200 on
`/v1/health` (restart-to-health, median of 5 restarts on the same state root; and once before
them with the session index removed, which that start rebuilds from every record; with the CPU
time the process used until then, less at the mercy of a busy box), `VmRSS` once healthy and
after the listings, and `GET /v1/sessions` (one page, the default limit; median of 30). The
follow-up: one session with 1,000 prior turns and one with 1, in the same gateway; each follow-up
is `POST /v1/session/{id}` with the current token, timed to its answer (the turn is started, not
waited for), 30 of each, alternating (median); the next one is sent once the previous turn ended.
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from harness import start_serve  # noqa: E402

from gateway.sessions._records import SessionRecord, new_event, now  # noqa: E402  # pyright: ignore[reportPrivateUsage]
from gateway.sessions._store import FileSessionStore  # noqa: E402  # pyright: ignore[reportPrivateUsage]

PRINCIPAL = "loopback"
RESTARTS = 5


def turn_events(session_id: str, n: int) -> list[dict[str, object]]:
    turn = f"turn_{n:016x}"
    return [
        new_event(session_id, "message.received", {"text": f"message {n}"}, turn),
        new_event(session_id, "turn.started", {"runner": "deterministic"}, turn),
        new_event(session_id, "message.appended", {"text": f"reply {n}"}, turn),
        new_event(session_id, "message.completed", {"text": f"reply {n}"}, turn),
        new_event(session_id, "turn.completed", {"status": "completed", "reply": f"reply {n}", "usage": {}}, turn),
        new_event(session_id, "session.waiting", {}, turn),
    ]


async def populate(state: Path, sessions: int, long_turns: int) -> dict[str, tuple[str, str]]:
    """`sessions` one-turn sessions, a `long` one of `long_turns` turns and a `fresh` one; their ids and tokens."""
    store = FileSessionStore(state)
    await store.open()
    named: dict[str, tuple[str, str]] = {}
    for i in range(sessions + 2):
        sid, token = f"ses_{secrets.token_hex(12)}", f"http:{secrets.token_urlsafe(24)}"
        turns = long_turns if i == sessions else 1
        record = SessionRecord(id=sid, owner=PRINCIPAL, continuation_token=token, created_at=now())
        record.last_turn = {"turnId": f"turn_{turns - 1:016x}", "status": "completed", "reply": "r", "usage": {}}
        await store.create(record)
        events = [new_event(sid, "session.started", {"channelId": "http", "mode": "chat", "title": None})]
        for n in range(turns):
            events += turn_events(sid, n)
        await store.append(sid, events)
        store.save(record)
        if i == sessions:
            named["long"] = (sid, token)
        elif i == sessions + 1:
            named["fresh"] = (sid, token)
    await store.aclose()
    return named


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used: less at the mercy of a busy box than wall time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise KeyError("VmRSS")


def wait_healthy(url: str, started: float) -> float:
    while True:
        try:
            if httpx2.get(f"{url}/v1/health", timeout=5).status_code == 200:
                return time.perf_counter() - started
        except httpx2.HTTPError:
            pass
        time.sleep(0.01)


def follow_ups(url: str, named: dict[str, tuple[str, str]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"long": [], "fresh": []}
    tokens = {kind: token for kind, (_, token) in named.items()}
    with httpx2.Client(base_url=url, timeout=60) as http:
        for _ in range(rounds):
            for kind in ("long", "fresh"):
                sid = named[kind][0]
                start = time.perf_counter()
                response = http.post(f"/v1/session/{sid}", json={"message": "hello", "continuationToken": tokens[kind]})
                times[kind].append(time.perf_counter() - start)
                assert response.status_code == 200, response.text
                tokens[kind] = response.json()["continuationToken"]
                while http.get(f"/v1/session/{sid}").json().get("status") == "running":
                    time.sleep(0.01)
    return {kind: statistics.median(values) * 1000 for kind, values in times.items()}


def run(sessions: int, long_turns: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        named = anyio.run(populate, state, sessions, long_turns)
        project = Path(tmp) / "project"
        (project / "agent").mkdir(parents=True)
        (state / "session-index.ndjson").unlink()  # the first start rebuilds it from every record
        started = time.perf_counter()
        proc, port = start_serve(project, state)
        rebuild = wait_healthy(f"http://127.0.0.1:{port}", started)
        rebuild_cpu = cpu_s(proc.pid)
        proc.terminate()
        proc.wait(30)
        healths: list[float] = []
        cpus: list[float] = []
        for _ in range(RESTARTS - 1):  # restarts on the same state root; the last one stays up for the rest
            started = time.perf_counter()
            proc, port = start_serve(project, state)
            healths.append(wait_healthy(f"http://127.0.0.1:{port}", started))
            cpus.append(cpu_s(proc.pid))
            proc.terminate()
            proc.wait(30)
        started = time.perf_counter()
        proc, port = start_serve(project, state)
        url = f"http://127.0.0.1:{port}"
        try:
            healths.append(wait_healthy(url, started))
            cpus.append(cpu_s(proc.pid))
            health = statistics.median(healths)
            idle = rss_mb(proc.pid)
            pages: list[float] = []
            with httpx2.Client(base_url=url, timeout=60) as http:
                for _ in range(30):
                    t = time.perf_counter()
                    page = http.get("/v1/sessions")
                    pages.append(time.perf_counter() - t)
                    assert page.status_code == 200, page.text
            listed = rss_mb(proc.pid)
            follow = follow_ups(url, named, 30)
            return {
                "health_s": health,
                "rebuild_s": rebuild,
                "cpu_s": statistics.median(cpus),
                "rebuild_cpu_s": rebuild_cpu,
                "idle_mb": idle,
                "listed_mb": listed,
                "page_ms": statistics.median(pages) * 1000,
                "page_items": float(len(page.json()["sessions"])),
                **{f"follow_{k}_ms": v for k, v in follow.items()},
            }
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    print(
        "| stored sessions | restart to health, s | its CPU, s | first start without the index, s | its CPU, s | "
        "RSS healthy, MB | "
        "RSS after listings, MB | one page, ms | sessions in it | follow-up, 1,000 turns, ms | follow-up, fresh, ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for sessions in (0, 100, 10_000):
        r = run(sessions, 1000)
        print(
            f"| {sessions:,} | {r['health_s']:.2f} | {r['cpu_s']:.2f} | {r['rebuild_s']:.2f} | "
            f"{r['rebuild_cpu_s']:.2f} | {r['idle_mb']:.0f} | "
            f"{r['listed_mb']:.0f} | {r['page_ms']:.1f} | {r['page_items']:.0f} | {r['follow_long_ms']:.1f} | "
            f"{r['follow_fresh_ms']:.1f} |"
        )


if __name__ == "__main__":
    os.environ.pop("AGENT_SDK_STATE_URL", None)
    main()
