"""`/v1/tools` over real HTTP: the catalog, direct calls and every error code of docs/http-api.md."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.conftest import free_port

from ..conftest import Served, Upstream, assert_clean, make_project, serve, serving, url_connection


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, everything: Upstream) -> Iterator[Served]:
    with serving(tmp_path_factory, "tools", {"everything": url_connection(everything.url)}) as served:
        yield served


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """An advertised connection that cannot be listed (nothing listens on its port)."""
    root = tmp_path_factory.mktemp("broken")
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    project = make_project(root / "project", {"deadline": url_connection(dead)})
    served = serve(project, root / "state")
    yield served
    served.stop()


def test_catalog_lists_authored_and_advertised_tools(server: Served) -> None:
    with server.client() as http:
        body = http.get("/v1/tools").json()
    names = {t["name"]: t["source"] for t in body["tools"]}
    assert names["lookup"] == "authored"
    assert names["echo"] == "advertised"
    assert body["connectionErrors"] == []


def test_describe_tool_gives_schema_effect_and_connection(server: Served) -> None:
    with server.client() as http:
        lookup = http.get("/v1/tools/lookup").json()["tool"]
        echo = http.get("/v1/tools/echo").json()["tool"]
        missing = http.get("/v1/tools/nope")
    assert lookup["effect"] == "read"
    assert lookup["inputSchema"]["required"] == ["key"]
    assert echo["connection"] == "everything" and echo["effect"] == "read"
    assert missing.status_code == 404
    assert missing.json()["error"] == "unknown_tool"
    assert "lookup" in missing.json()["available"]


def test_direct_call_returns_the_envelope(server: Served) -> None:
    with server.client() as http:
        response = http.post("/v1/tools/lookup", json={"input": {"key": "ab"}})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ok", "toolName", "callId", "isError", "result", "durationMs"}
    assert body["ok"] is True and body["toolName"] == "lookup" and body["isError"] is False
    assert body["callId"].startswith("tool_lookup_")
    assert body["result"] == {"key": "ab", "value": "AB", "session": None}
    assert isinstance(body["durationMs"], int)


def test_direct_call_of_an_advertised_tool_passes_through(server: Served) -> None:
    with server.client() as http:
        body = http.post("/v1/tools/get-sum", json={"input": {"a": 2, "b": 3}}).json()
    assert body["ok"] is True and body["isError"] is False
    assert "5" in body["result"]["content"][0]["text"]


def test_unknown_tool_is_404_with_available_names(server: Served) -> None:
    with server.client() as http:
        response = http.post("/v1/tools/nope", json={})
    assert response.status_code == 404
    body = response.json()
    assert body["ok"] is False and body["error"] == "unknown_tool"
    assert {"lookup", "bump", "echo"} <= set(body["available"])


def test_invalid_input_is_400_invalid_tool_input(server: Served) -> None:
    with server.client() as http:
        empty = http.post("/v1/tools/lookup", json={"input": {"key": ""}})
        wrong_type = http.post("/v1/tools/lookup", json={"input": ["not", "an", "object"]})
    for response in (empty, wrong_type):
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_tool_input"


def test_a_tool_that_raises_is_an_error_envelope_not_a_500(server: Served) -> None:
    with server.client() as http:
        response = http.post("/v1/tools/explode", json={})
    assert response.status_code == 200
    body = response.json()
    assert body["isError"] is True and "kaboom" in body["result"]["message"]
    assert_clean(response.text)


def test_malformed_continuation_token_is_400(server: Served) -> None:
    with server.client() as http:
        malformed = http.post("/v1/tools/lookup", json={"input": {"key": "a"}, "continuationToken": "no colon here"})
        both = http.post(
            "/v1/tools/lookup", json={"input": {"key": "a"}, "continuationToken": "http:abc", "sessionId": "ses_x"}
        )
        listing = http.get("/v1/tools", params={"continuationToken": "??"})
    for response in (malformed, both, listing):
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_continuation_token"


def test_unknown_session_is_404_session_not_found(server: Served) -> None:
    with server.client() as http:
        response = http.post(
            "/v1/tools/lookup", json={"input": {"key": "a"}, "sessionId": "ses_000000000000000000000000"}
        )
    assert response.status_code == 404
    assert response.json()["error"] == "session_not_found"


def test_bad_bodies_are_400_invalid_request(server: Served) -> None:
    with server.client() as http:
        not_json = http.post("/v1/tools/lookup", content=b"{nope", headers={"content-type": "application/json"})
        not_object = http.post("/v1/tools/lookup", json=[1, 2])
        extra = http.post("/v1/tools/lookup", json={"input": {}, "tenant": "other"})
    for response in (not_json, not_object, extra):
        assert response.status_code == 400
        assert response.json()["error"] == "invalid_request"
        assert_clean(response.text)


@pytest.mark.anyio
async def test_write_call_on_a_busy_session_is_409_and_a_read_runs_alongside(server: Served) -> None:
    async with httpx2.AsyncClient(base_url=server.url, timeout=30) as http:
        created = (await http.post("/v1/session", json={"message": "sleep 60"})).json()
        session_id = created["sessionId"]
        # The turn is admitted before POST /v1/session answers, so the session is busy from here on.
        assert (await http.get(f"/v1/session/{session_id}")).json()["status"] == "running"
        write = await http.post("/v1/tools/bump", json={"input": {"by": 1}, "sessionId": session_id})
        read = await http.post("/v1/tools/lookup", json={"input": {"key": "k"}, "sessionId": session_id})
        by_token = await http.post(
            "/v1/tools/lookup", json={"input": {"key": "k"}, "continuationToken": created["continuationToken"]}
        )
        await http.post(f"/v1/session/{session_id}/stop")
        after = await http.post("/v1/tools/bump", json={"input": {"by": 1}, "sessionId": session_id})
        events = (await http.get(f"/v1/session/{session_id}/events", params={"format": "json"})).json()["events"]
    assert write.status_code == 409 and write.json()["error"] == "session_busy"
    assert read.status_code == 200 and read.json()["result"]["session"] == session_id
    assert by_token.status_code == 200 and by_token.json()["result"]["session"] == session_id
    assert after.status_code == 200 and after.json()["isError"] is False
    recorded = [e for e in events if e["type"] == "action.result" and e["data"].get("direct")]
    assert [e["data"]["toolName"] for e in recorded] == ["lookup", "lookup", "bump"]
    assert all(e["turnId"] == e["data"]["callId"] for e in recorded)


def test_catalog_skips_a_failing_connection_and_reports_it(broken: Served) -> None:
    with broken.client() as http:
        body = http.get("/v1/tools").json()
    assert {t["name"] for t in body["tools"]} == {"bump", "explode", "lookup"}
    assert [e["connection"] for e in body["connectionErrors"]] == ["deadline"]


def test_unknown_route_and_wrong_method_are_json(server: Served) -> None:
    with server.client() as http:
        missing = http.get("/v1/nothing-here")
        wrong = http.delete("/v1/tools/lookup")
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert wrong.status_code == 405 and wrong.json()["error"] == "method_not_allowed"


def test_info_has_runtime_facts_and_health_is_public(server: Served, tmp_path: Path) -> None:
    with server.client() as http:
        info = http.get("/v1/info").json()
        health = http.get("/v1/health", headers={"X-Forwarded-For": "10.0.0.1"})
    assert info["runtime"]["auth"] == "loopback-strict"
    assert info["runtime"]["runner"] == "deterministic"
    assert {c["name"] for c in info["connections"]} == {"everything"}
    assert health.status_code == 200
