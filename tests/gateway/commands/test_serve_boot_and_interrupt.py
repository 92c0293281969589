"""What a real `agent-sdk serve` says when it cannot start or is stopped (issue #34, "bad input gets a
sentence"): a state store that does not answer at boot is one sentence and exit 1 before serving, never
with the password of the URL (a closed port, and a real `redis-server` that ran and was stopped); and with
`--log-format json`, Ctrl-C's "interrupted" is a JSON object like every other line on stderr."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from redis import Redis

from gateway.state.state_key import new_state_key
from tests.conftest import free_port
from tests.processes import wait_for_port

from ..conftest import ROOT, make_project
from ..replicas import RedisServer

PASSWORD = "pw-sekret-3141"
# As an interactive terminal has it: SIGINT raises KeyboardInterrupt in the child (a parent that ignores
# SIGINT, as a background shell job does, would hand that on to the child otherwise).
ENTRY = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from gateway.cli import entrypoint; entrypoint()"
)


def _env(**extra: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return {**inherited, "PYTHONPATH": str(ROOT), "AGENT_SDK_STATE_KEY": new_state_key(), **extra}


def _serve(tmp_path: Path, *flags: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`serve` that must refuse: one that served instead is stopped after 30 s, and the test fails."""
    cmd = [sys.executable, "-c", ENTRY, "serve", "--dir", str(make_project(tmp_path / "p")), "--port", "0",
           "--state-root", str(tmp_path / "state"), *flags]  # fmt: skip
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"serve did not refuse a state store that does not answer; it served:\n{exc.stdout!r}")


def _expected(port: int) -> str:
    return (
        f"agent-sdk: error: the state store at redis://127.0.0.1:{port}/0 cannot be reached (ConnectionError); "
        "start Redis there, or fix --state-url (AGENT_SDK_STATE_URL: host, port, database, password), then start "
        "serve again"
    )


def _assert_refused(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "serving" not in done.stdout  # refused before the banner, the port never bound
    everything = done.stdout + done.stderr
    assert "Traceback" not in everything and 'File "' not in everything and PASSWORD not in everything


def test_a_closed_port_as_the_state_store_is_one_sentence_before_serving(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    done = _serve(tmp_path, env=_env(AGENT_SDK_STATE_URL=f"redis://:{PASSWORD}@127.0.0.1:{port}/0"))
    _assert_refused(done)
    assert done.stderr.splitlines() == [_expected(port)]


def test_a_stopped_redis_server_is_one_sentence_as_text_and_one_json_object_with_json(tmp_path: Path) -> None:
    redis = RedisServer(tmp_path / "redis")
    redis.start()
    try:
        with Redis.from_url(redis.url) as client:
            assert client.ping() is True  # the store was there, at this URL
    finally:
        redis.stop()
    url = f"redis://:{PASSWORD}@127.0.0.1:{redis.port}/0"
    text = _serve(tmp_path, "--state-url", url, env=_env())
    _assert_refused(text)
    assert text.stderr.splitlines() == [_expected(redis.port)]
    logged = _serve(tmp_path, "--state-url", url, "--log-format", "json", env=_env())
    _assert_refused(logged)
    [line] = logged.stderr.splitlines()
    record = json.loads(line)
    assert (record["level"], record["logger"], record["event"]) == ("ERROR", "agent_sdk.cli", "error")
    assert record["message"] == _expected(redis.port)


def test_ctrl_c_under_the_json_log_is_a_json_object_like_every_line(tmp_path: Path) -> None:
    port = free_port()
    err = tmp_path / "stderr.log"
    cmd = [sys.executable, "-c", ENTRY, "serve", "--dir", str(make_project(tmp_path / "p")), "--port", str(port),
           "--state-root", str(tmp_path / "state"), "--log-format", "json"]  # fmt: skip
    with err.open("wb") as sink:
        proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=sink, start_new_session=True)
    try:
        wait_for_port(port, proc, "agent-sdk serve")
        # Answered once uvicorn's loop runs (the socket is bound before it): Ctrl-C of a running server.
        assert httpx2.get(f"http://127.0.0.1:{port}/v1/health", timeout=30).status_code == 200
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C, to this process alone
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # today: a raw "agent-sdk: interrupted" last line
    assert len(records) >= 2 and all(isinstance(r, dict) for r in records), lines
    said = [r for r in records if r.get("event") == "interrupted"]
    assert [(r["level"], r["logger"], r["message"]) for r in said] == [
        ("WARNING", "agent_sdk.cli", "agent-sdk: interrupted")
    ], lines
