"""An ended `Mcp-Session-Id` is 404 (issue 45 item 4; MCP Streamable HTTP, "Session Management": after the
server or the client ended a session, a request with its id is answered 404, and the client starts a new one).

The peer is the TypeScript SDK's Streamable HTTP client (its `terminateSession()` is the DELETE); the ended id is
then tried by POST, GET and DELETE, on the replica that ended it and on another one sharing the Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.peers import node20, node_module

from ..conftest import BASIC, HERE, assert_clean
from ..replicas import BEARER, redis_server, replica

TS_CLIENT = HERE.parent / "fixtures" / "peers_js" / "ts_session_end_client.mjs"
HEADERS = {
    "Authorization": f"Bearer {BEARER}",
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
LIST = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _ts(url: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "MCP_SDK_DIR": str(node_module("@modelcontextprotocol", "sdk", "package.json").parent),
        "MCP_HEADERS": json.dumps({"Authorization": f"Bearer {BEARER}"}),
    }
    done = subprocess.run(
        [node20(), str(TS_CLIENT), f"{url}/v1/mcp/tools"], env=env, capture_output=True, text=True, timeout=90
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.peers
def test_a_session_the_ts_client_ended_is_404_on_every_replica_and_a_new_one_works(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as redis:
        one = replica(BASIC, tmp_path / "r1", redis.url)
        two = replica(BASIC, tmp_path / "r2", redis.url)
        try:
            out = _ts(one.url)
            ended = out["sessionId"]
            assert ended and out["before"] is False and out["terminated"] is True, out
            # The SDK's own request with the ended id is refused 404 (its StreamableHTTPError carries the status).
            assert out["stale"]["code"] == 404, out
            # A new session (the SDK's next `initialize`) is a new id, and it works.
            assert out["newSessionId"] not in (None, ended) and out["after"] is False, out
            with httpx2.Client(timeout=30) as http:
                for served in (one, two):  # the end is in Redis: every replica knows it
                    posted = http.post(
                        f"{served.url}/v1/mcp/tools", json=LIST, headers={**HEADERS, "Mcp-Session-Id": ended}
                    )
                    assert posted.status_code == 404, posted.text
                    assert posted.json()["id"] == 5 and posted.json()["error"]["data"]["error"] == "session_not_found"
                    assert "initialize again" in posted.json()["error"]["message"]
                    again = http.delete(f"{served.url}/v1/mcp/tools", headers={**HEADERS, "Mcp-Session-Id": ended})
                    assert again.status_code == 404, again.text
                made_up = http.post(
                    f"{two.url}/v1/mcp/tools", json=LIST, headers={**HEADERS, "Mcp-Session-Id": "made-up-session"}
                )
                assert made_up.status_code == 404 and made_up.json()["id"] == 5, made_up.text
                # Without a session id the endpoint is as stateless as before.
                plain = http.post(f"{two.url}/v1/mcp/tools", json=LIST, headers=HEADERS)
                assert plain.status_code == 200 and plain.json()["result"]["tools"], plain.text
        finally:
            one.stop()
            two.stop()
    assert_clean(one.log_text(), [BEARER])
    assert_clean(two.log_text(), [BEARER])


@pytest.mark.peers
def test_while_redis_restarts_a_session_check_is_503_with_a_sentence_and_works_again_after(tmp_path: Path) -> None:
    """Every POST with an `Mcp-Session-Id` reads its ended mark in Redis: while Redis is away that read is
    answered 503 `state_unavailable` (a sentence that says retry, `Retry-After`), never 500 with a traceback in
    the log, and the same session works once Redis is back."""
    with redis_server(tmp_path / "redis") as redis:
        served = replica(BASIC, tmp_path / "r1", redis.url)
        try:
            with httpx2.Client(timeout=30) as http:
                opened = http.post(f"{served.url}/v1/mcp/tools", json=INITIALIZE, headers=HEADERS)
                assert opened.status_code == 200, opened.text
                session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
                redis.kill()
                posted = http.post(f"{served.url}/v1/mcp/tools", json=LIST, headers=session)
                _assert_retry_shortly(posted)
                assert posted.json()["id"] == 5, posted.text  # the POST's error answers its own request
                _assert_retry_shortly(http.delete(f"{served.url}/v1/mcp/tools", headers=session))
                redis.start()
                after = http.post(f"{served.url}/v1/mcp/tools", json=LIST, headers=session)
                assert after.status_code == 200 and after.json()["result"]["tools"], after.text
        finally:
            served.stop()
    assert "Traceback" not in served.log_text()
    assert_clean(served.log_text(), [BEARER])


def _assert_retry_shortly(answer: httpx2.Response) -> None:
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1", answer.text
    error = answer.json()["error"]
    assert error["data"]["error"] == "state_unavailable", error
    assert "state store is unavailable" in error["message"] and "retry" in error["message"], error
