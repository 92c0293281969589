"""Two `agent-sdk serve --state-url` replicas on one real Redis: a session made on one is read on the other,
a stop or follow-up sent to the other reaches the turn's owner, and when the owner is killed the other
closes its turn as `interrupted`, once, and takes the next follow-up."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ..conftest import Served, assert_clean
from ..replicas import BEARER, RedisServer, assert_one_turn_at_a_time, redis_server, replica, replica_project

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

LEASE = 2.0
AUTH = {"Authorization": f"Bearer {BEARER}"}


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replica_project(tmp_path_factory.mktemp("replica-project"))


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, redis: RedisServer, project: Path
) -> Iterator[tuple[Served, Served]]:
    root = tmp_path_factory.mktemp("pair")
    a = replica(project, root / "a", redis.url, lease=LEASE)
    b = replica(project, root / "b", redis.url, lease=LEASE)
    yield a, b
    for served in (a, b):
        served.stop()
        assert_clean(served.log_text(), [BEARER])


def _client(served: Served) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=served.url, headers=AUTH, timeout=30)


async def _until(http: httpx2.AsyncClient, sid: str, done: Any, start: int = 0) -> list[dict[str, Any]]:
    """Read the stream from `start` until `done(event)`; every event read."""
    seen: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with http.stream("GET", f"/v1/session/{sid}/stream", params={"startIndex": start}) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line:
                    seen.append(json.loads(line))
                    if done(seen[-1]):
                        return seen
    raise AssertionError("the stream ended early")


def _ended(turn: str) -> Any:
    return lambda e: e["type"] == "session.waiting" and e.get("turnId") == turn


async def test_a_session_made_on_one_replica_is_read_on_the_other(pair: tuple[Served, Served]) -> None:
    a, b = pair
    async with _client(a) as on_a, _client(b) as on_b:
        made = (await on_a.post("/v1/session", json={"message": "hello", "title": "shared"})).json()
        sid = made["sessionId"]
        events = await _until(on_b, sid, _ended(made["turnId"]))
        snapshot = (await on_b.get(f"/v1/session/{sid}")).json()
        listed = (await on_b.get("/v1/sessions", params={"limit": 5})).json()
        tail = await _until(on_b, sid, _ended(made["turnId"]), start=2)
        check = await on_b.post(
            "/v1/mcp",
            headers={"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "check", "arguments": {"sessionId": sid}},
            },
        )
        other = await on_b.get(f"/v1/session/{sid}", headers={"Authorization": "Bearer another-principal-0123456789"})
    assert snapshot["status"] == "completed" and snapshot["reply"] == "hello" and snapshot["title"] == "shared"
    assert snapshot["eventCount"] == len(events)
    assert [e["index"] for e in events] == list(range(len(events)))
    assert tail == events[2:]
    assert sid in [s["sessionId"] for s in listed["sessions"]]
    checked = check.json()["result"]["structuredContent"]
    assert check.status_code == 200 and checked["status"] == "completed" and checked["sessionId"] == sid
    assert other.status_code == 401


async def test_stop_sent_to_the_other_replica_cancels_the_turn_where_it_runs(pair: tuple[Served, Served]) -> None:
    a, b = pair
    async with _client(a) as on_a, _client(b) as on_b:
        made = (await on_a.post("/v1/session", json={"message": "sleep 60"})).json()
        sid, turn = made["sessionId"], made["turnId"]
        await _until(on_b, sid, lambda e: e["type"] == "turn.started")
        stopped = (await on_b.post(f"/v1/session/{sid}/stop")).json()
        events = await _until(on_b, sid, _ended(turn))
        again = (await on_b.post(f"/v1/session/{sid}/stop")).json()
    assert stopped == {"ok": True, "sessionId": sid, "stopped": True}
    assert again["stopped"] is False
    failed = [e for e in events if e["type"] == "turn.failed"]
    assert len(failed) == 1 and failed[0]["data"]["status"] == "cancelled" and failed[0]["turnId"] == turn


async def test_a_follow_up_at_the_other_replica_preempts_the_running_turn(pair: tuple[Served, Served]) -> None:
    a, b = pair
    async with _client(a) as on_a, _client(b) as on_b:
        made = (await on_a.post("/v1/session", json={"message": "sleep 60"})).json()
        sid = made["sessionId"]
        await _until(on_b, sid, lambda e: e["type"] == "turn.started")
        follow = await on_b.post(
            f"/v1/session/{sid}", json={"message": "now", "continuationToken": made["continuationToken"]}
        )
        second = follow.json()["turnId"]
        events = await _until(on_a, sid, _ended(second))
    assert follow.status_code == 200
    closes = [(e["turnId"], e["data"]["status"]) for e in events if e["type"] in ("turn.failed", "turn.completed")]
    assert closes == [(made["turnId"], "cancelled"), (second, "completed")]
    assert_one_turn_at_a_time(events)


async def test_two_follow_ups_with_one_token_at_two_replicas_start_one_turn(pair: tuple[Served, Served]) -> None:
    a, b = pair
    async with _client(a) as on_a, _client(b) as on_b:
        made = (await on_a.post("/v1/session", json={"message": "sleep 0.2"})).json()
        sid, token = made["sessionId"], made["continuationToken"]
        answers: list[httpx2.Response] = []

        async def follow(http: httpx2.AsyncClient, text: str) -> None:
            answers.append(await http.post(f"/v1/session/{sid}", json={"message": text, "continuationToken": token}))

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(follow, on_a, f"a{i}")
                tg.start_soon(follow, on_b, f"b{i}")
        codes = sorted(r.status_code for r in answers)
        winner = next(r.json() for r in answers if r.status_code == 200)
        events = await _until(on_b, sid, _ended(winner["turnId"]))
    assert codes == [200, 409, 409, 409, 409, 409]
    assert all(r.json()["error"] == "stale_continuation_token" for r in answers if r.status_code == 409)
    assert_one_turn_at_a_time(events)


@pytest.mark.parametrize(
    ("how", "error"), [(signal.SIGKILL, "owner_lost"), (signal.SIGTERM, "server_stopping")], ids=["kill-9", "sigterm"]
)
async def test_a_turn_whose_replica_goes_away_ends_interrupted_once_and_the_session_goes_on(
    tmp_path: Path, redis: RedisServer, project: Path, how: signal.Signals, error: str
) -> None:
    """kill -9: another replica closes the turn once its lease lapses. SIGTERM: the replica closes it itself."""
    owner = replica(project, tmp_path / "owner", redis.url, lease=LEASE)
    survivor = replica(project, tmp_path / "survivor", redis.url, lease=LEASE)
    try:
        async with _client(owner) as on_owner, _client(survivor) as on_survivor:
            made = (await on_owner.post("/v1/session", json={"message": "sleep 600"})).json()
            sid, turn = made["sessionId"], made["turnId"]
            await _until(on_survivor, sid, lambda e: e["type"] == "turn.started")
            gone = time.monotonic()
            await anyio.to_thread.run_sync(lambda: owner.stop(how))
            events = await _until(on_survivor, sid, _ended(turn))
            noticed = time.monotonic() - gone
            follow = await on_survivor.post(
                f"/v1/session/{sid}", json={"message": "after", "continuationToken": made["continuationToken"]}
            )
            later = await _until(on_survivor, sid, _ended(follow.json()["turnId"]))
            await anyio.sleep(LEASE + 1.5)  # long enough for a second reaper pass to have closed it again, if it could
            final = (await on_survivor.get(f"/v1/session/{sid}/events", params={"format": "json"})).json()["events"]
    finally:
        survivor.stop()
        owner.stop()
    print(f"lease {LEASE}s, {how.name}: the turn was closed {noticed:.2f}s after its replica was told to go")
    failed = [e for e in final if e["type"] == "turn.failed"]
    assert [(e["turnId"], e["data"]["status"], e["data"]["error"]) for e in failed] == [(turn, "interrupted", error)]
    assert events[-1]["type"] == "session.waiting"
    assert follow.status_code == 200 and later[-2]["type"] == "turn.completed" and later[-2]["data"]["reply"] == "after"
    assert [e["index"] for e in final] == list(range(len(final)))
    assert_one_turn_at_a_time(final)
    assert_clean(survivor.log_text(), [BEARER])
    assert_clean(owner.log_text(), [BEARER])


async def test_with_redis_down_tool_calls_still_answer_state_routes_are_503_and_all_recovers(
    tmp_path: Path, project: Path
) -> None:
    with redis_server(tmp_path / "own-redis") as own:
        served = replica(project, tmp_path / "alone", own.url, lease=LEASE)
        try:
            async with _client(served) as http:
                made = (await http.post("/v1/session", json={"message": "before"})).json()
                own.kill()
                direct = await http.post("/v1/tools/lookup", json={"input": {"key": "k"}})
                rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
                rpc["params"] = {"name": "lookup", "arguments": {"key": "k"}}
                native = await http.post("/v1/mcp/tools", json=rpc, headers={"Accept": "application/json"})
                down = [
                    await http.get("/v1/sessions"),
                    await http.post("/v1/session", json={"message": "during"}),
                    await http.get(f"/v1/session/{made['sessionId']}/events"),
                    await http.post("/v1/tools/lookup", json={"input": {"key": "k"}, "sessionId": made["sessionId"]}),
                ]
                await anyio.to_thread.run_sync(own.start)
                after = await http.post("/v1/session", json={"message": "after"})
                kept = await http.get(f"/v1/session/{made['sessionId']}")
        finally:
            served.stop()
    assert direct.status_code == 200 and direct.json()["result"]["value"] == "K"
    assert native.status_code == 200 and native.json()["result"]["structuredContent"]["value"] == "K"
    for response in down:
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["error"] == "state_unavailable" and "Redis" in body["message"] and "retry" in body["message"]
    assert after.status_code == 200 and kept.status_code == 200  # no restart; what was acknowledged is there
    assert_clean(served.log_text(), [BEARER])
