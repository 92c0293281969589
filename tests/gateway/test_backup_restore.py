"""docs/deploy.md "Backup and restore", performed: the page's own shell blocks, run as written, against a real
Redis and a real `agent-sdk serve`, with a person signed in through oidc-provider to a `grants='per_principal'`
connection (tests/gateway/per_user.py).

Back up, stop, wipe (Redis flushed, the state root and the state key file removed), restore, start again: the
person still calls the tool without signing in again, a peer's sealed `Mcp-Session-Id` still opens (the state key
came back), and a session made before is still there. Leave a piece out of the page's procedure (the state key,
Redis, the state root) and this fails."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from redis import Redis

from tests.oauth.peers import ResourceServer

from .conftest import Served, assert_clean, serve
from .per_user import PEERS, peer_env, per_user_project, session_turn, sign_in, sign_in_url_in, text_of, whoami
from .replicas import RedisServer, redis_server

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "docs" / "deploy.md"
_BLOCK = re.compile(r"<!-- doc-run:[^>]*procedure=([\w-]+) -->\n```[^\n]*\n(.*?)```", re.S)
HANDSHAKE = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
    "authorization": f"Bearer {PEERS['bob']}",
}


def procedure(*names: str) -> list[str]:
    """The shell blocks of docs/deploy.md marked `procedure=<name>`, in the page's order."""
    found = [(name, body) for name, body in _BLOCK.findall(DEPLOY.read_text()) if name in names]
    assert {name for name, _ in found} == set(names), f"docs/deploy.md lost a procedure block: {names}"
    return [body for _, body in found]


def run_blocks(blocks: list[str], env: dict[str, str]) -> None:
    """Each block in bash, stopping at the first failing command, with `agent-sdk` on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    for body in blocks:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body],
            env={"PATH": path, "HOME": env["STATE_ROOT"], **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (body, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


def _session_id(url: str) -> str:
    """A handshake-era peer's `initialize` as bob: the sealed `Mcp-Session-Id` it is given."""
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "backup", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    answer = httpx2.post(f"{url}/v1/mcp/tools", json=body, headers=HANDSHAKE, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def _honours(url: str, session: str) -> bool:
    """Whether the gateway opens `session` (a `tools/list` in it answers 200) rather than refusing it (404)."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    answer = httpx2.post(f"{url}/v1/mcp/tools", json=body, headers={**HANDSHAKE, "mcp-session-id": session}, timeout=30)
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code == 200


@pytest.mark.parametrize("mode", ["replicas", "one-process"])
def test_the_documented_backup_and_restore_brings_back_a_signed_in_person(
    mode: str, tmp_path: Path, resource: ResourceServer, redis: RedisServer
) -> None:
    project = per_user_project(tmp_path / "project", resource.url)
    state_root = tmp_path / "var-lib-agent-sdk"
    secrets = tmp_path / "run-secrets"
    secrets.mkdir(mode=0o700)
    places = {"STATE_ROOT": str(state_root), "BACKUP": str(tmp_path / "backups" / "20261205T000000Z")}
    env = peer_env()
    names = ["backup", "restore"]
    if mode == "replicas":
        key_file = secrets / "agent-sdk-state.key"
        made = subprocess.run(
            [sys.executable, "-m", "gateway", "state-key", "--out", str(key_file)], capture_output=True, check=False
        )
        assert made.returncode == 0, made.stderr
        places |= {"AGENT_SDK_STATE_URL": redis.url, "AGENT_SDK_STATE_KEY_FILE": str(key_file)}
        env |= places
        names = ["backup", "backup-replicas", "restore", "restore-replicas"]

    served: Served = serve(project, state_root, env=env)
    try:
        with httpx2.Client(timeout=30.0) as http:
            asked = whoami(http, served.url, "alice")
            assert asked["isError"] is True  # not signed in yet: a sign-in URL
            page = sign_in(sign_in_url_in(text_of(asked)), "alice")
            assert page.status_code == 200 and "Signed in" in page.text, page.text
            assert text_of(whoami(http, served.url, "alice")) == "alice"
        sealed = _session_id(served.url)
        assert _honours(served.url, sealed)
        turn = anyio.run(session_turn, served.url, "alice", "call whoami {}")
        assert turn["type"] == "turn.completed", turn
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))

    run_blocks(procedure(*[n for n in names if n.startswith("backup")]), places)
    backup = Path(places["BACKUP"])
    assert all(f.stat().st_mode & 0o077 == 0 for f in backup.iterdir()), "a backup holds secrets: 0600"

    # The wipe: Redis flushed, the state root and the state key file gone.
    with Redis.from_url(redis.url) as raw:
        if mode == "replicas":  # every key the gateway wrote is in the backup (none outside `agent-sdk:`)
            held = {json.loads(line)["key"] for line in (backup / "redis.jsonl").read_text().splitlines()[1:]}
            written = {key.decode() for key in raw.scan_iter(count=1000)}
            assert written and written <= held, written - held
        raw.flushall()
    shutil.rmtree(state_root)
    for item in secrets.iterdir():
        item.unlink()

    run_blocks(procedure(*[n for n in names if n.startswith("restore")]), places)
    served = serve(project, state_root, env=env)
    try:
        with httpx2.Client(timeout=30.0) as http:
            again = whoami(http, served.url, "alice")
            assert (again["isError"], text_of(again)) == (False, "alice")  # no new sign-in
            assert whoami(http, served.url, "erin")["isError"] is True  # nobody else got alice's grant
            owner = {"authorization": f"Bearer {PEERS['alice']}"}
            kept = http.get(f"{served.url}/v1/session/{turn['session']['sessionId']}", headers=owner)
            assert kept.status_code == 200, kept.text
        assert _honours(served.url, sealed)  # the same state key: sealed ids from before still open
    finally:
        served.stop()
    assert_clean(served.log_text(), list(PEERS.values()))


def test_state_restore_refuses_a_store_that_holds_keys_and_a_file_that_is_not_a_backup(
    tmp_path: Path, redis: RedisServer
) -> None:
    cli = [sys.executable, "-m", "gateway"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AGENT_SDK_STATE_URL": redis.url}
    with Redis.from_url(redis.url) as raw:
        raw.flushall()
        raw.set("agent-sdk:count", "3")
        raw.set("someone-else", "x")
        raw.set("agent-sdk:request-state:used:r1", "1", px=600_000)  # kept with its expiry
        backup = tmp_path / "redis.jsonl"
        made = subprocess.run([*cli, "state-backup", "--out", str(backup)], env=env, capture_output=True, text=True)
        assert made.returncode == 0 and "backed up 2 keys" in made.stdout, made.stderr
        busy = subprocess.run([*cli, "state-restore", str(backup)], env=env, capture_output=True, text=True)
        assert busy.returncode == 1 and "already holds agent-sdk keys" in busy.stderr, busy.stderr
        assert "Traceback" not in busy.stderr
        cut = tmp_path / "cut.jsonl"
        cut.write_text(backup.read_text().splitlines()[0] + "\n")
        short = subprocess.run([*cli, "state-restore", str(cut)], env=env, capture_output=True, text=True)
        assert short.returncode == 1 and "cut short" in short.stderr, short.stderr
        raw.delete("agent-sdk:count", "agent-sdk:request-state:used:r1")
        done = subprocess.run([*cli, "state-restore", str(backup)], env=env, capture_output=True, text=True)
        assert done.returncode == 0 and "restored 2 keys" in done.stdout, done.stderr
        assert raw.get("agent-sdk:count") == b"3" and raw.get("someone-else") == b"x"
        assert raw.pttl("agent-sdk:count") == -1  # no expiry: none given
        assert 0 < raw.pttl("agent-sdk:request-state:used:r1") <= 600_000  # its expiry, not a new one


def test_state_backup_without_a_reachable_store_says_so_without_its_password(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "gateway", "state-backup", "--out", str(tmp_path / "b.jsonl")]
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    unset = subprocess.run(cli, env=base, capture_output=True, text=True, check=False)
    assert unset.returncode == 1 and "set AGENT_SDK_STATE_URL to the replicas' Redis URL" in unset.stderr
    url = "redis://:hunter2-secret@127.0.0.1:9/0"
    away = subprocess.run(cli, env={**base, "AGENT_SDK_STATE_URL": url}, capture_output=True, text=True, check=False)
    assert away.returncode == 1, away.stderr
    assert away.stderr.startswith("agent-sdk: error: the state store at redis://127.0.0.1:9/0 cannot be used")
    assert "hunter2" not in away.stdout + away.stderr and "Traceback" not in away.stderr
    assert not (tmp_path / "b.jsonl").exists()
