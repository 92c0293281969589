"""Hub API keys in Redis: made once by the CLI (`AGENT_SDK_STATE_URL=redis://... agent-sdk hub keys create`),
accepted by every `serve --hub --state-url` replica, and a revoke reaches all of them within a couple of
seconds; while Redis is away for longer than the copy may age, no key is admitted (fail closed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from ..conftest import ROOT, Served, assert_clean, make_project, serve
from ..replicas import BEARER, STATE_KEY, RedisServer, redis_server

pytestmark = [pytest.mark.peers]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path / "redis") as server:
        yield server


def _cli(redis: RedisServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENT_SDK_STATE_URL": redis.url}
    cmd = [sys.executable, "-c", "from gateway.cli import entrypoint; entrypoint()", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)


def _connectors(served: Served, key: str) -> int:
    return httpx2.get(
        f"{served.url}/v1/hub/connectors", headers={"Authorization": f"Bearer {key}"}, timeout=10
    ).status_code


def _until(want: int, served: Served, key: str, limit: float = 10.0) -> float:
    """Seconds until `served` answers `want` for `key` (fails after `limit`)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if _connectors(served, key) == want:
            return time.monotonic() - started
        time.sleep(0.1)
    raise AssertionError(f"{served.url} never answered {want}")


def test_a_key_made_once_works_on_every_replica_and_a_revoke_reaches_them_all(
    tmp_path: Path, redis: RedisServer
) -> None:
    linear = "from connections import define_connection\n\n"
    linear += "connection = define_connection(url='http://127.0.0.1:9/mcp', linkable=True)\n"
    project = make_project(tmp_path / "hub", {"linear": linear}, tools=False)
    made = _cli(redis, "hub", "keys", "create", "--dir", str(project), "--account", "team", "--all")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert not (project / ".agent-sdk" / "hub-keys.json").exists()  # in Redis, not in a file
    env = {"AGENT_SDK_BEARER_TOKEN": BEARER, "AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_STATE_KEY": STATE_KEY}
    replicas = [serve(project, tmp_path / f"r{i}", "--hub", env=env) for i in range(2)]
    try:
        assert [_connectors(r, key) for r in replicas] == [200, 200]
        assert [_connectors(r, "ask_not-a-key") for r in replicas] == [401, 401]
        listed = _cli(redis, "hub", "keys", "list", "--json", "--dir", str(project))
        [record] = json.loads(listed.stdout)
        revoked = _cli(redis, "hub", "keys", "revoke", record["id"], "--dir", str(project))
        assert revoked.returncode == 0, revoked.stderr
        took = [_until(401, r, key) for r in replicas]
        other = _cli(redis, "hub", "keys", "create", "--dir", str(project), "--account", "team", "--all").stdout.strip()
        _until(200, replicas[0], other)
        redis.kill()
        stale = _until(401, replicas[0], other, limit=15)  # no key admitted once the copy is too old
        redis.start()
        back = _until(200, replicas[0], other)
    finally:
        for r in replicas:
            r.stop()
    print(f"hub keys: revoke seen by the replicas after {[round(t, 2) for t in took]} s;", end=" ")
    print(f"Redis away -> keys refused after {stale:.1f} s; admitted again {back:.1f} s after it returned")
    for r in replicas:
        assert_clean(r.log_text(), [key, other, BEARER])


def test_hub_keys_with_redis_away_fail_with_a_sentence_and_no_password(tmp_path: Path) -> None:
    away = RedisServer(tmp_path / "never-started")  # a free port nothing listens on
    away.url = f"redis://:pw-sekret-42@127.0.0.1:{away.port}/0"
    done = _cli(away, "hub", "keys", "list", "--dir", str(tmp_path))
    assert done.returncode == 1
    assert (
        f"cannot use the hub keys at redis://127.0.0.1:{away.port}/0" in done.stderr and "is Redis up?" in done.stderr
    )
    assert "pw-sekret-42" not in done.stderr + done.stdout and "Traceback" not in done.stderr
