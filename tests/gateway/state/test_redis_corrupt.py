"""What a replica does with values in Redis it did not write (a bad restore, a hand edit, another program on the
same database): as the file store does with a damaged file, the one record is skipped (or the one event marked
unreadable) with a log line naming its key, and everyone else's sessions, listings and new sessions go on. Values
written straight into a real Redis with redis-py, then the HTTP API of a real `serve --state-url` replica."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis import Redis

from tests.gateway.accounts.test_accounts import cli

from ..conftest import Served, make_project, serve
from ..replicas import BEARER, STATE_KEY, redis_server, replica

POISON = ("{not json", "many", "[1, 2", '["a", "list"]', "{torn", "lots")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Served, Redis]]:
    with redis_server(tmp_path / "redis") as server:
        served = replica(make_project(tmp_path / "project"), tmp_path / "state", server.url)
        served.headers = {"Authorization": f"Bearer {BEARER}"}
        raw = Redis.from_url(server.url, decode_responses=True)
        try:
            yield served, raw
        finally:
            served.stop()
            raw.close()


def _until_waiting(served: Served, session: str, start: int = 0) -> list[dict[str, Any]]:
    """The session's events from `start` up to the next `session.waiting` (the turn has settled)."""
    out: list[dict[str, Any]] = []
    with served.client() as http, http.stream("GET", f"/v1/session/{session}/stream?startIndex={start}") as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            out.append(json.loads(line))
            if out[-1]["type"] == "session.waiting":
                return out
    raise AssertionError(f"the stream ended before the turn settled: {out}")


def _create(served: Served, message: str) -> str:
    with served.client() as http:
        made = http.post("/v1/session", json={"message": message})
    assert made.status_code == 200, made.text
    session = made.json()["sessionId"]
    _until_waiting(served, session)
    return session


def test_poisoned_records_events_and_counters_skip_that_one_and_the_rest_still_work(
    cluster: tuple[Served, Redis],
) -> None:
    served, raw = cluster
    foreign, bad_rec, bad_n, bad_last, bad_shape, torn, good = (_create(served, f"message {i}") for i in range(7))
    raw.xadd(f"agent-sdk:s:{foreign}:ev", {"e": "{}"})  # an entry with an id of Redis's choosing, not 0-N
    raw.hset(f"agent-sdk:s:{bad_rec}", "rec", POISON[0])
    raw.hset(f"agent-sdk:s:{bad_n}", "n", POISON[1])
    raw.hset(f"agent-sdk:s:{bad_last}", "last", POISON[2])
    raw.hset(f"agent-sdk:s:{bad_shape}", "rec", POISON[3])
    count = int(raw.hget(f"agent-sdk:s:{torn}", "n"))  # type: ignore[arg-type]
    raw.xadd(f"agent-sdk:s:{torn}:ev", {"e": POISON[4]}, id=f"0-{count + 1}")
    raw.hset(f"agent-sdk:s:{torn}", "n", count + 1)
    raw.set("agent-sdk:count", POISON[5])

    with served.client() as http:
        listed = http.get("/v1/sessions")
        assert listed.status_code == 200, listed.text
        assert [s["sessionId"] for s in listed.json()["sessions"]] == [good, torn, foreign]  # the bad skipped
        for skipped in (bad_rec, bad_n, bad_last, bad_shape):
            gone = http.get(f"/v1/session/{skipped}")
            assert gone.status_code == 404 and gone.json()["message"] == f"no session {skipped!r}"

        kept = http.get(f"/v1/session/{foreign}/events", params={"format": "json"}).json()["events"]
        assert [e["index"] for e in kept] == list(range(len(kept))) and kept[-1]["type"] == "session.waiting"

        events = http.get(f"/v1/session/{torn}/events", params={"format": "json"}).json()["events"]
        assert [e["index"] for e in events] == list(range(count + 1))
        assert events[-1]["type"] == "event.unreadable" and events[-1]["sessionId"] == torn
        assert events[0]["type"] == "session.started"

        # A follow-up reads the history (the unreadable event with it) and runs; its events follow in order.
        token = http.get(f"/v1/session/{torn}").json()["continuationToken"]
        followed = http.post(f"/v1/session/{torn}", json={"message": "again", "continuationToken": token})
        assert followed.status_code == 200, followed.text
        after = _until_waiting(served, torn, count + 1)
        assert [e["index"] for e in after] == list(range(count + 1, count + 1 + len(after)))
        assert after[-2]["type"] == "turn.completed"

        info = http.get("/v1/info")
        assert info.status_code == 200 and info.json()["runtime"]["sessions"] is None  # unknown, not a 500

    assert _create(served, "a new session for everyone") not in (bad_rec, bad_n)  # creation still works

    log = served.log_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log
    for value in POISON:
        assert value not in log
    for session in (bad_rec, bad_n, bad_last, bad_shape):
        assert f"agent-sdk:s:{session}" in log
    assert f"agent-sdk:s:{torn}:ev" in log and f"agent-sdk:s:{foreign}:ev" in log and "agent-sdk:count" in log


def test_a_poisoned_hub_key_record_is_skipped_and_every_other_key_still_admits(tmp_path: Path) -> None:
    linear = "from connections import define_connection\n\n"
    linear += "connection = define_connection(url='http://127.0.0.1:9/mcp', linkable=True)\n"
    project = make_project(tmp_path / "hub", {"linear": linear}, tools=False)
    with redis_server(tmp_path / "redis") as server:
        env = {"AGENT_SDK_STATE_URL": server.url}
        made = cli("hub", "keys", "create", "--dir", str(project), "--account", "team", "--all", env=env)
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        raw = Redis.from_url(server.url, decode_responses=True)
        raw.hset("agent-sdk:hub-keys", "hk_poisoned", POISON[0])
        raw.hset("agent-sdk:hub-keys", "hk_shapeless", POISON[3])
        raw.close()

        listed = cli("hub", "keys", "list", "--json", "--dir", str(project), env=env)
        assert listed.returncode == 0, listed.stderr
        assert [k["account"] for k in json.loads(listed.stdout)] == ["team"]
        assert "hk_poisoned" in listed.stderr and "hk_shapeless" in listed.stderr
        assert POISON[0] not in listed.stderr and "Traceback" not in listed.stderr

        served = serve(
            project,
            tmp_path / "state",
            "--hub",
            env={**env, "AGENT_SDK_BEARER_TOKEN": BEARER, "AGENT_SDK_STATE_KEY": STATE_KEY},
        )
        try:
            with served.client({"Authorization": f"Bearer {key}"}) as http:
                assert http.get("/v1/hub/connectors").status_code == 200
            log = served.log_text()
            assert "hk_poisoned" in log and POISON[0] not in log and "Traceback" not in log
            assert key not in log
        finally:
            served.stop()
