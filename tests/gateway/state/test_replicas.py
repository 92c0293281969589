"""The deployment of docs/deploy.md under load: Redis, nginx running `deploy/nginx.conf`, three
`agent-sdk serve --state-url` replicas with one project, 20 concurrent clients for about 30 s.

14 clients make sessions and follow them up, reading each turn's events from the live stream with
`startIndex` reconnects (on purpose every few events, and whenever a stream breaks); 6 clients call
`echo` on the advertised stdio connection through `/v1/mcp/tools`. A third of the way in one replica
is `kill -9`ed; at two thirds it is started again; then Redis itself is killed for 5 s and started
again (its append-only file is synced on every write, as docs/deploy.md advises).

Counted, printed and asserted: no acknowledged session lost; every stream's events contiguous, not
duplicated, in order, and what each reader saw equal to the final log; every accepted turn ended
`completed` or `interrupted`; each reconnect resumed exactly at its index; failed `tools/call`s no
more than were in flight on the killed replica (nginx's log says which), each a clean error; state
routes answered 503 `state_unavailable` while Redis was down and tools/call kept working; no
replica restarted by the outage.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ..conftest import Served, assert_clean
from ..replicas import (
    BEARER,
    RedisServer,
    assert_one_turn_at_a_time,
    nginx_front,
    redis_server,
    replica,
    replica_project,
)

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.timeout(240)]

LEASE = 3.0
RUN_S = 30.0
KILL_AT, RESTART_AT = RUN_S / 3, 2 * RUN_S / 3
REDIS_DOWN_AT, REDIS_DOWN_S = RUN_S - 6.0, 5.0
SESSION_CLIENTS, TOOL_CLIENTS = 14, 6
AUTH = {"Authorization": f"Bearer {BEARER}"}
MCP = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@dataclass
class Tally:
    t0: float = field(default_factory=time.monotonic)
    sessions: dict[str, str] = field(default_factory=dict)
    """Acknowledged sessions: id -> the last continuation token we know."""
    turns: dict[str, str] = field(default_factory=dict)
    """Accepted turns: turn id -> session id."""
    seen: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    reconnects: int = 0
    resumed_at_index: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    tool_ok: int = 0
    tool_failed: list[str] = field(default_factory=list)
    tool_failed_during_outage: int = 0
    outage_probes: list[tuple[int, str]] = field(default_factory=list)
    killed_at: float = 0.0
    redis_down: tuple[float, float] = (0.0, 0.0)
    stop: bool = False
    timeline: list[str] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.t0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[RedisServer, list[Served], str, Path, Path]]:
    project = replica_project(tmp_path / "project")
    with redis_server(tmp_path / "redis") as redis:
        replicas = [replica(project, tmp_path / f"r{i}", redis.url, lease=LEASE) for i in range(3)]
        try:
            with nginx_front(tmp_path / "nginx", [r.port for r in replicas], access_log=True) as front:
                yield redis, replicas, front, project, tmp_path / "nginx" / "access.log"
        finally:
            for r in replicas:
                r.stop()


async def test_three_replicas_behind_nginx_lose_nothing_when_one_is_killed_and_redis_blinks(
    cluster: tuple[RedisServer, list[Served], str, Path, Path], tmp_path: Path
) -> None:
    redis, replicas, front, project, access_log = cluster
    tally = Tally()
    limits = httpx2.Limits(max_connections=64, max_keepalive_connections=32)
    async with httpx2.AsyncClient(base_url=front, headers=AUTH, timeout=60, limits=limits) as http:
        # Warm the stdio children (one per replica) so the first calls do not all pay the start.
        for _ in range(6):
            await _tool_call(http, "warm")
        tally.t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            for w in range(SESSION_CLIENTS):
                tg.start_soon(_session_client, http, tally, w)
            for w in range(TOOL_CLIENTS):
                tg.start_soon(_tool_client, http, tally, w)
            tg.start_soon(_outage_prober, http, tally)
            await _chaos(tally, redis, replicas, project, tmp_path)
            await anyio.sleep(max(3.0, RUN_S - tally.now()))  # clients run on after Redis is back
            tally.stop = True
            tally.timeline.append(f"clients told to stop at {tally.now():.1f}s")
        final = await _final_state(http, tally)
    _report_and_assert(tally, final, replicas, access_log)


# -- the clients -----------------------------------------------------------------------------------


async def _session_client(http: httpx2.AsyncClient, tally: Tally, w: int) -> None:
    n = 0
    while not tally.stop:
        n += 1
        made = await _post(http, tally, "/v1/session", {"message": _message(w, n), "title": f"w{w}"})
        if made is None:
            continue
        sid = made["sessionId"]
        tally.sessions[sid] = made["continuationToken"]
        tally.turns[made["turnId"]] = sid
        tally.seen[sid] = []
        turn: str | None = made["turnId"]
        for _ in range(4):
            if turn is not None:
                await _read_turn(http, tally, sid, turn)
            if tally.stop:
                return
            n += 1
            body = {"message": _message(w, n), "continuationToken": tally.sessions[sid]}
            answer = await _post(http, tally, f"/v1/session/{sid}", body)
            if answer is None:  # not accepted (its replica died, or Redis was away): learn the current token
                turn = None
                await _refresh_token(http, tally, sid)
                continue
            tally.sessions[sid] = answer["continuationToken"]
            tally.turns[answer["turnId"]] = sid
            turn = answer["turnId"]


def _message(w: int, n: int) -> str:
    return f'hello {w}.{n}\nsleep 0.4\ncall lookup {{"key": "k{w}x{n}"}}'


async def _post(http: httpx2.AsyncClient, tally: Tally, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        response = await http.post(path, json=body)
    except httpx2.HTTPError as exc:
        tally.refused[type(exc).__name__] += 1
        await anyio.sleep(0.2)
        return None
    if response.status_code != 200:
        tally.refused[f"{response.status_code} {_code(response)}"] += 1
        await anyio.sleep(0.2)
        return None
    return response.json()


def _code(response: httpx2.Response) -> str:
    try:
        return str(response.json().get("error"))
    except ValueError:
        return "non-json"


async def _refresh_token(http: httpx2.AsyncClient, tally: Tally, sid: str) -> None:
    for _ in range(100):
        if tally.stop:
            return
        try:
            response = await http.get(f"/v1/session/{sid}")
            if response.status_code == 200:
                tally.sessions[sid] = response.json()["continuationToken"]
                return
        except httpx2.HTTPError:
            pass
        await anyio.sleep(0.2)


async def _read_turn(http: httpx2.AsyncClient, tally: Tally, sid: str, turn: str) -> None:
    """Follow the stream until `turn` ends, reconnecting from the next index every 4 events and after any break."""
    seen = tally.seen[sid]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        start = len(seen)
        if start:
            tally.reconnects += 1
        try:
            async with http.stream("GET", f"/v1/session/{sid}/stream", params={"startIndex": start}) as response:
                if response.status_code != 200:
                    tally.refused[f"stream {response.status_code}"] += 1
                    await anyio.sleep(0.2)
                    continue
                got = 0
                async for line in response.aiter_lines():
                    if not line:
                        continue
                    event = json.loads(line)
                    if got == 0 and start:
                        assert event["index"] == start, f"resumed at {event['index']}, asked for {start}"
                        tally.resumed_at_index += 1
                    seen.append(event)
                    got += 1
                    if event["type"] == "session.waiting" and event.get("turnId") == turn:
                        return
                    if got == 4:
                        break  # reconnect on purpose
        except httpx2.HTTPError:
            tally.refused["stream broke"] += 1
            await anyio.sleep(0.1)
    raise AssertionError(f"turn {turn} of {sid} never ended on the stream; the last events read: {seen[-4:]}")


async def _tool_call(http: httpx2.AsyncClient, text: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": text}},
    }
    return await http.post("/v1/mcp/tools", json=body, headers=MCP)


async def _tool_client(http: httpx2.AsyncClient, tally: Tally, w: int) -> None:
    n = 0
    while not tally.stop:
        n += 1
        text = f"t{w}.{n}"
        try:
            response = await _tool_call(http, text)
            ok = response.status_code == 200 and text in response.text and '"isError":true' not in response.text
            failure = "" if ok else f"{response.status_code} {response.text[:200]}"
        except httpx2.HTTPError as exc:
            failure = type(exc).__name__
        if not failure:
            tally.tool_ok += 1
            continue
        tally.tool_failed.append(failure)
        start, end = tally.redis_down
        if start and start <= tally.now() <= (end or 1e9):
            tally.tool_failed_during_outage += 1


# -- what happens to the deployment ---------------------------------------------------------------


async def _chaos(tally: Tally, redis: RedisServer, replicas: list[Served], project: Path, tmp: Path) -> None:
    await anyio.sleep(KILL_AT)
    victim = replicas[1]
    tally.killed_at = time.time()
    victim.stop(signal.SIGKILL)
    tally.timeline.append(f"killed r1 at {tally.now():.1f}s")
    await anyio.sleep(max(0.0, RESTART_AT - tally.now()))
    replicas[1] = await anyio.to_thread.run_sync(
        lambda: replica(project, tmp / "r1-again", redis.url, lease=LEASE, port=victim.port)
    )
    tally.timeline.append(f"r1 healthy again at {tally.now():.1f}s")
    await anyio.sleep(max(0.0, REDIS_DOWN_AT - tally.now()))
    redis.kill()
    tally.redis_down = (tally.now(), 0.0)
    await anyio.sleep(REDIS_DOWN_S)
    await anyio.to_thread.run_sync(redis.start)
    tally.redis_down = (tally.redis_down[0], tally.now())


async def _outage_prober(http: httpx2.AsyncClient, tally: Tally) -> None:
    """While Redis is down (after a moment to be sure of it), the state routes answer 503 state_unavailable."""
    while not tally.stop:
        start, end = tally.redis_down
        if start and not end and tally.now() > start + 0.5:
            some = next(iter(tally.sessions), "ses_000000000000000000000000")
            for response in (
                await http.get(f"/v1/session/{some}"),
                await http.post("/v1/session", json={"message": "while redis is down"}),
                await http.get("/v1/sessions"),
            ):
                if not tally.redis_down[1]:
                    tally.outage_probes.append((response.status_code, _code(response)))
                    assert "Traceback" not in response.text
                    assert response.json()["message"]
        await anyio.sleep(0.3)


async def _final_state(http: httpx2.AsyncClient, tally: Tally) -> dict[str, Any]:
    """Every acknowledged session, once no turn runs (a lapsed lease is closed within LEASE + 1 s)."""
    sessions: dict[str, dict[str, Any]] = {}
    with anyio.fail_after(60):
        for sid in list(tally.sessions):
            while True:
                response = await http.get(f"/v1/session/{sid}")
                assert response.status_code == 200, response.text
                if response.json()["status"] != "running":
                    break
                await anyio.sleep(0.25)
            events = (await http.get(f"/v1/session/{sid}/events", params={"format": "json"})).json()["events"]
            sessions[sid] = {"snapshot": response.json(), "events": events}
    listed: set[str] = set()
    cursor: str | None = None
    while True:
        params = {"limit": 100, **({"cursor": cursor} if cursor else {})}
        page = (await http.get("/v1/sessions", params=params)).json()
        listed |= {s["sessionId"] for s in page["sessions"]}
        cursor = page["nextCursor"]
        if cursor is None:
            break
    return {"sessions": sessions, "listed": listed}


def _in_flight_on(access_log: Path, port: int, at: float) -> int:
    """`/v1/mcp/tools` requests nginx had passed to the replica on `port` at the instant `at`."""
    count = 0
    for line in access_log.read_text().splitlines():
        match = re.fullmatch(r'(\S+) (\S+) (\d+) "([^"]*)" (\S+)', line)
        assert match is not None, line
        ended, duration, _status, upstreams, uri = match.groups()
        started = float(ended) - float(duration)
        if (
            uri == "/v1/mcp/tools"
            and re.search(rf":{port}\b", upstreams)
            and started <= at + 0.01 <= float(ended) + 0.05
        ):
            count += 1
    return count


def _report_and_assert(tally: Tally, final: dict[str, Any], replicas: list[Served], access_log: Path) -> None:
    sessions = final["sessions"]
    lost = [sid for sid in tally.sessions if sid not in sessions]
    unlisted = [sid for sid in tally.sessions if sid not in final["listed"]]
    gaps, mismatched = [], []
    for sid, state in sessions.items():
        events = state["events"]
        if [e["index"] for e in events] != list(range(len(events))):
            gaps.append(sid)
        seen = tally.seen.get(sid, [])
        if events[: len(seen)] != seen:
            mismatched.append(sid)
        assert_one_turn_at_a_time(events)  # two replicas never ran two turns of one session at once
    endings: Counter[str] = Counter()
    for turn, sid in tally.turns.items():
        closes = [
            e
            for e in sessions[sid]["events"]
            if e.get("turnId") == turn and e["type"] in ("turn.completed", "turn.failed")
        ]
        endings[
            "never closed" if not closes else "closed twice" if len(closes) > 1 else closes[0]["data"]["status"]
        ] += 1
    in_flight = _in_flight_on(access_log, replicas[1].port, tally.killed_at)
    probes = Counter(f"{status} {code}" for status, code in tally.outage_probes)
    events_total = sum(len(s["events"]) for s in sessions.values())
    print(
        f"\nreplicas: sessions acknowledged={len(tally.sessions)} lost={len(lost)} unlisted={len(unlisted)}"
        f"\n  events={events_total} streams with a gap/duplicate/disorder={len(gaps)}"
        f" reader/log mismatches={len(mismatched)}"
        f"\n  turns accepted={len(tally.turns)} endings={dict(endings)}"
        f"\n  stream reconnects={tally.reconnects} (of which delivered events, each from exactly the asked index:"
        f" {tally.resumed_at_index})"
        f"\n  tools/call ok={tally.tool_ok} failed={len(tally.tool_failed)}"
        f" (in flight on the killed replica: {in_flight})"
        f" failed while redis was down={tally.tool_failed_during_outage}"
        f"\n  redis down {tally.redis_down[0]:.1f}s..{tally.redis_down[1]:.1f}s;"
        f" state-route probes meanwhile={dict(probes)}"
        f"\n  refusals seen by clients={dict(tally.refused)}"
        f"\n  timeline: {'; '.join(tally.timeline)}"
    )
    assert lost == [] and unlisted == []
    assert gaps == [] and mismatched == []
    assert set(endings) <= {"completed", "interrupted"}, endings
    assert endings["completed"] > 0
    assert tally.resumed_at_index > 0  # each one checked as it happened: its first event had the asked index
    assert len(tally.tool_failed) <= in_flight, tally.tool_failed
    for failure in tally.tool_failed:
        assert "Traceback" not in failure
    assert tally.tool_ok > 0 and tally.tool_failed_during_outage == 0
    assert probes and set(probes) == {"503 state_unavailable"}, probes
    for served in replicas:
        assert served.proc.poll() is None, "a replica exited"
        assert_clean(served.log_text(), [BEARER])
