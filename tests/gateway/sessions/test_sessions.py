"""Sessions over real HTTP: create, follow-up with rotating tokens, preempt, stop, events, stream,
listing, and state that survives a restart."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from ..conftest import BASIC, Served, assert_clean, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("sessions")
    served = serve(BASIC, root / "state")
    yield served
    served.stop()
    assert_clean(served.log_text())


async def _until(http: httpx2.AsyncClient, session_id: str, kind: str, start: int = 0) -> list[dict[str, Any]]:
    """Follow the live stream until an event of `kind` arrives; every event read so far."""
    seen: list[dict[str, Any]] = []
    with anyio.fail_after(30):
        async with http.stream("GET", f"/v1/session/{session_id}/stream", params={"startIndex": start}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/x-ndjson")
            async for line in response.aiter_lines():
                if not line:
                    continue
                event = json.loads(line)
                seen.append(event)
                if event["type"] == kind:
                    return seen
    raise AssertionError(f"stream ended before {kind}")


@pytest.mark.anyio
async def test_a_session_runs_a_turn_and_records_its_events(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        created = await http.post("/v1/session", json={"message": 'hello\ncall lookup {"key": "q"}', "title": "t"})
        body = created.json()
        events = await _until(http, body["sessionId"], "turn.completed")
        ndjson = await http.get(f"/v1/session/{body['sessionId']}/events")
        as_json = (await http.get(f"/v1/session/{body['sessionId']}/events", params={"format": "json"})).json()
    assert created.status_code == 200 and body["ok"] is True
    assert body["sessionId"].startswith("ses_") and body["continuationToken"].startswith("http:")
    kinds = [e["type"] for e in events]
    assert kinds[:3] == ["session.started", "message.received", "turn.started"]
    assert {"actions.requested", "action.result", "message.appended", "message.completed"} <= set(kinds)
    assert [e["index"] for e in events] == list(range(len(events)))
    for event in events:
        assert set(event) >= {"type", "index", "sessionId", "at", "data"}
        assert event["sessionId"] == body["sessionId"]
    completed = events[-1]["data"]
    assert completed["status"] == "completed" and completed["reply"].startswith("hello")
    assert completed["usage"]["inputTokens"] > 0
    lines = [json.loads(x) for x in ndjson.text.splitlines()]
    assert ndjson.headers["content-type"].startswith("application/x-ndjson")
    assert lines[: len(events)] == events
    assert as_json["sessionId"] == body["sessionId"] and as_json["events"][: len(events)] == events


@pytest.mark.anyio
async def test_follow_up_rotates_the_token_and_a_stale_one_is_409(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        first = (await http.post("/v1/session", json={"message": "one"})).json()
        sid, token1 = first["sessionId"], first["continuationToken"]
        second = await http.post(f"/v1/session/{sid}", json={"message": "two", "continuationToken": token1})
        token2 = second.json()["continuationToken"]
        stale = await http.post(f"/v1/session/{sid}", json={"message": "three", "continuationToken": token1})
        malformed = await http.post(f"/v1/session/{sid}", json={"message": "x", "continuationToken": "nope"})
        missing_token = await http.post(f"/v1/session/{sid}", json={"message": "x"})
        missing_message = await http.post(f"/v1/session/{sid}", json={"continuationToken": token2})
        unknown = await http.post(
            "/v1/session/ses_000000000000000000000000", json={"message": "x", "continuationToken": token2}
        )
        traversal = await http.get("/v1/session/..%2F..%2Fetc/events")
    assert second.status_code == 200 and token2 != token1
    assert stale.status_code == 409 and stale.json()["error"] == "stale_continuation_token"
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_continuation_token"
    assert missing_token.status_code == 400 and missing_message.status_code == 400
    assert unknown.status_code == 404 and unknown.json()["error"] == "session_not_found"
    assert traversal.status_code == 404


@pytest.mark.anyio
async def test_a_follow_up_to_a_busy_session_preempts_the_running_turn(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        first = (await http.post("/v1/session", json={"message": "sleep 60"})).json()
        sid = first["sessionId"]
        await _until(http, sid, "turn.started")
        follow = await http.post(
            f"/v1/session/{sid}", json={"message": "now", "continuationToken": first["continuationToken"]}
        )
        events = await _until(http, sid, "turn.completed")
    assert follow.status_code == 200
    failed = [e for e in events if e["type"] == "turn.failed"]
    completed = [e for e in events if e["type"] == "turn.completed"]
    assert len(failed) == 1 and failed[0]["data"]["status"] == "cancelled"
    assert completed[0]["data"]["reply"] == "now"
    assert failed[0]["turnId"] != completed[0]["turnId"]
    assert failed[0]["index"] < completed[0]["index"]


@pytest.mark.anyio
async def test_stop_interrupts_the_turn_and_the_session_takes_another_message(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        first = (await http.post("/v1/session", json={"message": "sleep 60"})).json()
        sid = first["sessionId"]
        stopped = (await http.post(f"/v1/session/{sid}/stop")).json()
        idle = (await http.post(f"/v1/session/{sid}/stop")).json()
        snapshot = (await http.get(f"/v1/session/{sid}")).json()
        again = await http.post(
            f"/v1/session/{sid}", json={"message": "after", "continuationToken": first["continuationToken"]}
        )
        events = await _until(http, sid, "turn.completed")
    assert stopped["stopped"] is True and idle["stopped"] is False
    assert snapshot["status"] == "cancelled"
    assert again.status_code == 200
    assert [e["data"]["status"] for e in events if e["type"] == "turn.failed"] == ["cancelled"]


@pytest.mark.anyio
async def test_a_runner_error_ends_the_turn_failed_with_its_sentence(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        sid = (await http.post("/v1/session", json={"message": "fail the model is away"})).json()["sessionId"]
        events = await _until(http, sid, "session.waiting")
        snapshot = (await http.get(f"/v1/session/{sid}")).json()
    failed = [e["data"] for e in events if e["type"] == "turn.failed"]
    assert failed == [{"status": "failed", "error": "runner_failed", "message": "the model is away"}]
    assert snapshot["status"] == "failed" and snapshot["error"] == "runner_failed"


@pytest.mark.anyio
async def test_stream_from_start_index_skips_what_was_read(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        sid = (await http.post("/v1/session", json={"message": "hi"})).json()["sessionId"]
        everything = await _until(http, sid, "turn.completed")
        tail = await _until(http, sid, "turn.completed", start=3)
        bad = await http.get(f"/v1/session/{sid}/stream", params={"startIndex": "-1"})
        bad_format = await http.get(f"/v1/session/{sid}/events", params={"format": "xml"})
    assert tail == everything[3:]
    assert bad.status_code == 400 and bad_format.status_code == 400


@pytest.mark.anyio
async def test_sessions_lists_only_the_callers_own(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        sid = (await http.post("/v1/session", json={"message": "listed", "title": "mine"})).json()["sessionId"]
        listed = (await http.get("/v1/sessions")).json()["sessions"]
    mine = [s for s in listed if s["sessionId"] == sid]
    assert len(mine) == 1 and mine[0]["title"] == "mine" and mine[0]["continuationToken"].startswith("http:")


@pytest.mark.anyio
async def test_sessions_page_newest_first_by_cursor_and_refuse_a_bad_one(tmp_path: Path) -> None:
    served = serve(BASIC, tmp_path / "state")
    try:
        async with httpx2.AsyncClient(base_url=served.url, timeout=30) as http:
            made = [(await http.post("/v1/session", json={"message": f"m{i}"})).json()["sessionId"] for i in range(5)]
            pages: list[list[str]] = []
            cursor = None
            while True:
                params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
                page = (await http.get("/v1/sessions", params=params)).json()
                pages.append([s["sessionId"] for s in page["sessions"]])
                if (cursor := page["nextCursor"]) is None:
                    break
            bad = [
                await http.get("/v1/sessions", params=params)
                for params in ({"limit": 0}, {"limit": 201}, {"limit": "x"}, {"cursor": "not-ours"})
            ]
    finally:
        served.stop()
    assert pages == [made[4:2:-1], made[2:0:-1], made[:1]]
    for response in bad:
        assert response.status_code == 400 and response.json()["error"] == "invalid_request", response.text


def test_bad_create_bodies_are_400(server: Served) -> None:
    with server.client() as http:
        for body in ({}, {"message": ""}, {"message": 5}, {"message": "x", "purpose": "other"}):
            response = http.post("/v1/session", json=body)
            assert response.status_code == 400, body
            assert response.json()["error"] == "invalid_request"


@pytest.mark.anyio
async def test_state_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = serve(BASIC, state)
    try:
        async with httpx2.AsyncClient(base_url=first.url, timeout=30) as http:
            done = (await http.post("/v1/session", json={"message": "before restart"})).json()
            await _until(http, done["sessionId"], "turn.completed")
            busy = (await http.post("/v1/session", json={"message": "sleep 600"})).json()
            await _until(http, busy["sessionId"], "turn.started")
            before = (await http.get(f"/v1/session/{done['sessionId']}/events", params={"format": "json"})).json()
    finally:
        first.stop(signal.SIGKILL)  # a crash: the busy turn never gets to record its end
    second = serve(BASIC, state)
    try:
        async with httpx2.AsyncClient(base_url=second.url, timeout=30) as http:
            replayed = (await http.get(f"/v1/session/{done['sessionId']}/events", params={"format": "json"})).json()
            listed = {s["sessionId"] for s in (await http.get("/v1/sessions")).json()["sessions"]}
            follow = await http.post(
                f"/v1/session/{done['sessionId']}",
                json={"message": "after restart", "continuationToken": done["continuationToken"]},
            )
            events = await _until(http, done["sessionId"], "turn.completed", start=len(before["events"]))
            cut = (await http.get(f"/v1/session/{busy['sessionId']}/events", params={"format": "json"})).json()
    finally:
        second.stop()
    assert replayed["events"] == before["events"]
    assert {done["sessionId"], busy["sessionId"]} <= listed
    assert follow.status_code == 200
    assert events[-1]["data"]["reply"] == "after restart"
    assert events[0]["index"] == len(before["events"])
    closing = [e for e in cut["events"] if e["type"] == "turn.failed"]
    assert len(closing) == 1 and closing[0]["data"]["status"] == "interrupted"
    assert oct((state / "sessions" / f"{done['sessionId']}.json").stat().st_mode & 0o777) == "0o600"
