"""What a deployment needs from `serve`: `/v1/ready` beside `/v1/health` (the state store answers, every
`--warm` start finished; 503 naming each cause otherwise), several bearer tokens in
`AGENT_SDK_BEARER_TOKEN`, and `--warm` saying how many of how many connections are ready."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx2

from tests.gateway.conftest import ROOT, assert_clean, make_project, serve
from tests.gateway.replicas import STATE_KEY, RedisServer

COUNTING = ROOT / "tests" / "fixtures" / "upstreams" / "counting_server.py"
TOKENS = ("first-token-0123456789abcdef", "second-token-0123456789abcdef")

# A stdio server that does not start until the test opens its gate (a file): a warm start in progress.
_GATED = (
    "import os, runpy, sys, time\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.02)\n"
    f"sys.argv = [{str(COUNTING)!r}, 'stdio']\n"
    f"runpy.run_path({str(COUNTING)!r}, run_name='__main__')\n"
)


def _gated_connection(gate: Path) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=['-c', {_GATED!r}, {str(gate)!r}])\n"
    )


def test_ready_waits_for_the_warm_starts_and_says_how_many_are_ready(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    project = make_project(tmp_path / "project", {"slow": _gated_connection(gate)})
    served = serve(project, tmp_path / "state", "--warm")
    try:
        with served.client() as http:
            assert http.get("/v1/health").status_code == 200
            waiting = http.get("/v1/ready")  # no auth: what a load balancer polls
            assert waiting.status_code == 503, waiting.text
            assert waiting.json()["causes"] == [
                {"code": "warming", "message": "--warm: 0 of 1 connection starts finished"}
            ], waiting.text
            gate.touch()
            deadline = time.monotonic() + 60
            answer = http.get("/v1/ready")
            while answer.status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
                answer = http.get("/v1/ready")
            assert answer.status_code == 200, answer.text
            assert answer.json() == {
                "ok": True,
                "state": "ok",
                "warm": {"total": 1, "ready": 1, "failed": 0},
                "causes": [],
            }
    finally:
        served.stop()
    log = served.log_text()
    assert_clean(log)
    assert "warm start: 1 of 1 connections ready" in log, log


def test_ready_is_503_while_the_state_store_does_not_answer(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        project = make_project(tmp_path / "project")
        env = {"AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_BEARER_TOKEN": TOKENS[0], "AGENT_SDK_STATE_KEY": STATE_KEY}
        served = serve(project, tmp_path / "state", env=env)
        try:
            with served.client() as http:
                before = http.get("/v1/ready")
                redis.kill()  # the shared store goes away under a running replica
                health, during = http.get("/v1/health"), http.get("/v1/ready")
                redis.start()  # back on the same port: ready again, no restart
                after = http.get("/v1/ready")
        finally:
            served.stop()
    finally:
        redis.stop()
    assert before.status_code == 200 and before.json()["state"] == "ok", before.text
    assert health.status_code == 200
    assert during.status_code == 503, during.text
    assert during.json()["state"] == "unreachable"
    assert [c["code"] for c in during.json()["causes"]] == ["state_unavailable"], during.text
    assert str(redis.port) not in during.text  # it answers anyone: no URL
    assert after.status_code == 200, after.text


def test_several_bearer_tokens_from_the_environment_each_admit(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    served = serve(project, tmp_path / "state", env={"AGENT_SDK_BEARER_TOKEN": ",".join(TOKENS)})
    try:
        answers = [
            httpx2.get(f"{served.url}/v1/info", headers={"Authorization": f"Bearer {t}"}, timeout=30)
            for t in (*TOKENS, "third-token-0123456789abcdef")
        ]
    finally:
        served.stop()
    assert [a.status_code for a in answers] == [200, 200, 401], [a.text for a in answers]
    assert answers[0].json()["runtime"]["bearerTokens"] == 2
    assert_clean(served.log_text(), TOKENS)
