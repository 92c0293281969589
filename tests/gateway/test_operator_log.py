"""`serve`'s log as an operator reads it: each failed turn, failed tool call and refused request is
one line, with the request id the client got in `X-Request-Id`, the connection's name, and no secret."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.gateway.conftest import Served, make_project, serve

TOKEN = "tok-" + "s3cr3t" * 6
HEADER_SECRET = "hdr-" + "hushhush" * 4
TOOL_SECRET = "pw=" + "letmein" * 4

# docs/connections.md's per-session auth example as it used to read: `session.auth` is the principal
# string, so `session.auth["tenant"]` raises TypeError and every turn fails.
TENANT = """\
from connections import define_connection

async def auth(session):
    return {"headers": {"X-Tenant": session.auth["tenant"]}}

connection = define_connection(
    url="http://127.0.0.1:9/mcp", headers={"X-Key": "${HEADER_SECRET_19}"}, auth=auth, advertise_tools=True
)
"""

LEAKY = f"""\
from connections import define_tool

def execute(value, ctx):
    raise RuntimeError({TOOL_SECRET!r})

tool = define_tool(description="Raises with a secret in its message.", input={{"type": "object"}}, execute=execute)
"""


def log_lines(served: Served, event: str, *, wait_s: float = 10.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    while True:
        found = [doc for doc in map(_json, served.log_text().splitlines()) if doc.get("event") == event]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _json(line: str) -> dict[str, Any]:
    try:
        doc = json.loads(line)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("oplog")
    project = make_project(root / "project", {"tenant": TENANT})
    (project / "agent" / "tools" / "leaky.py").write_text(LEAKY)
    env = {"AGENT_SDK_BEARER_TOKEN": TOKEN, "HEADER_SECRET_19": HEADER_SECRET}
    running = serve(project, root / "state", "--log-format", "json", env=env)
    yield running
    running.stop()


def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKEN}"}


def test_a_failed_turn_is_one_line_with_its_request_id_and_connection(served: Served) -> None:
    with served.client(headers=auth()) as http:
        started = http.post("/v1/session", json={"message": "hello"})
        assert started.status_code == 200, started.text
        request_id = started.headers["x-request-id"]
        session = started.json()["sessionId"]
    [line] = log_lines(served, "turn_failed")
    assert line["request_id"] == request_id and line["session_id"] == session
    assert (line["level"], line["connection"], line["code"], line["status"]) == (
        "WARNING", "tenant", "turn_build_failed", "failed"
    )  # fmt: skip
    assert line["message"] == (
        "turn failed: turn_build_failed: the turn's toolset cannot be built (1 problem); no tools were offered: "
        "- connection 'tenant': the auth callback raised TypeError; the turn does not run without its identity"
    )


def test_a_failed_tool_call_is_one_line_naming_the_tool_without_its_message(served: Served) -> None:
    with served.client(headers=auth()) as http:
        called = http.post("/v1/tools/leaky", json={"input": {}})
    assert called.status_code == 200 and called.json()["isError"] is True
    [line] = [d for d in log_lines(served, "tool_failed") if d["request_id"] == called.headers["x-request-id"]]
    assert (line["tool"], line["code"], line["level"]) == ("leaky", "tool_failed", "WARNING")
    assert line["message"] == "tool call 'leaky' failed: tool_failed: RuntimeError"


def test_a_refused_request_is_one_line_and_its_body_carries_the_request_id(served: Served) -> None:
    wrong = "Bearer " + "w" * 40
    with served.client(headers={"Authorization": wrong, "X-Request-Id": "trace-19.a"}) as http:
        refused = http.get("/v1/tools")
    assert refused.status_code == 401
    assert refused.headers["x-request-id"] == "trace-19.a"
    assert refused.json() == {
        "ok": False, "error": "unauthorized", "message": refused.json()["message"], "requestId": "trace-19.a"
    }  # fmt: skip
    lines = [d for d in map(_json, served.log_text().splitlines()) if d.get("request_id") == "trace-19.a"]
    assert [(d["logger"], d["level"]) for d in lines] == [("agent_sdk.auth", "WARNING")]
    assert "unauthorized" in lines[0]["message"]


def test_a_request_the_guard_refuses_gets_an_id_in_header_body_and_one_log_line(served: Served) -> None:
    # The request-id middleware is outermost, before the request guard (Host, Origin, content type).
    headers = {**auth(), "X-Request-Id": "trace-19.g", "Origin": "http://evil.example"}
    with served.client(headers=headers) as http:
        refused = http.get("/v1/tools")
    assert refused.status_code == 403
    assert refused.headers["x-request-id"] == "trace-19.g"
    assert refused.json() == {
        "ok": False, "error": "forbidden_origin", "message": refused.json()["message"], "requestId": "trace-19.g"
    }  # fmt: skip
    lines = [d for d in map(_json, served.log_text().splitlines()) if d.get("request_id") == "trace-19.g"]
    assert [(d["logger"], d["level"]) for d in lines] == [("agent_sdk.auth", "WARNING")]
    assert "forbidden_origin" in lines[0]["message"]


def test_the_log_holds_no_secret_and_no_traceback(served: Served) -> None:
    with served.client(headers=auth()) as http:
        http.post("/v1/tools/explode", json={"input": {}})
    log_lines(served, "tool_failed")
    text = served.log_text()
    for secret in (TOKEN, HEADER_SECRET, TOOL_SECRET, "w" * 40, "kaboom"):
        assert secret not in text
    assert "Traceback" not in text
    # Every log line is one JSON object, uvicorn's own too (the banner is stdout's, the test merges them).
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("agent-sdk: serving")]
    assert all(_json(line) for line in lines), text


def test_every_answer_carries_a_fresh_request_id_and_a_bad_incoming_one_is_replaced(served: Served) -> None:
    with served.client(headers=auth()) as http:
        first, second = http.get("/v1/health"), http.get("/v1/tools")
        forged = http.get("/v1/health", headers={"X-Request-Id": "a b;<script>" + "x" * 200})
    ids = [r.headers["x-request-id"] for r in (first, second, forged)]
    assert len(set(ids)) == 3 and all(i.startswith("req_") and len(i) == 20 for i in ids)


def test_the_text_log_keeps_a_forged_line_on_one_line_and_carries_the_request_id(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("textlog")
    running = serve(make_project(root / "project"), root / "state", env={"AGENT_SDK_BEARER_TOKEN": TOKEN})
    try:
        with running.client() as http:
            refused = http.get("/v1/tools%0AINFO%20agent_sdk.auth:%20all%20good")
    finally:
        running.stop()
    assert refused.status_code == 401
    request_id = refused.headers["x-request-id"]
    [line] = [line for line in running.log_text().splitlines() if request_id in line]
    assert line.startswith("WARNING agent_sdk.auth: refused GET /v1/tools\ufffdINFO agent_sdk.auth: all good")
    assert line.endswith(f"request_id={request_id}")
    assert not any(line.startswith("INFO agent_sdk.auth: all good") for line in running.log_text().splitlines())
