"""The deployment's state key (`gateway/state/state_key.py`, docs/deploy.md "The state key"): made by `agent-sdk
state-key`, given to every replica as a 0600 file or `AGENT_SDK_STATE_KEY`, never kept in Redis; a missing,
malformed or exposed key is one sentence before `serve` starts. Real Redis and real `serve` replicas."""

from __future__ import annotations

import base64
import itertools
import os
from pathlib import Path

import pytest
from redis import Redis

from gateway.settings import ServeSettings
from gateway.state.state_key import StateKeyInvalid, check_state_key, new_state_key, parse_state_key
from tests.gateway.accounts.test_accounts import cli
from tests.gateway.state.test_sealing import _other_spellings  # pyright: ignore[reportPrivateUsage]

from ..conftest import make_project, serve
from ..replicas import BEARER, redis_server

INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
HANDSHAKE = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def _refusal(*flags: str, env: dict[str, str], tmp_path: Path) -> str:
    """What `serve` says when it refuses to start: one line on stderr, exit 1, no banner, no traceback."""
    done = cli("serve", "--dir", str(make_project(tmp_path / "p")), "--port", "0", *flags, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "serving" not in done.stdout and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def test_state_url_without_a_key_is_refused_with_how_to_make_one(tmp_path: Path) -> None:
    said = _refusal(
        env={"AGENT_SDK_STATE_URL": "redis://127.0.0.1:9/0", "AGENT_SDK_BEARER_TOKEN": BEARER}, tmp_path=tmp_path
    )
    assert said.startswith("agent-sdk: error: --state-url needs the deployment's state key, the same on every replica")
    assert "agent-sdk state-key --out PATH" in said and "--state-key-file PATH or AGENT_SDK_STATE_KEY" in said


MALFORMED = (
    "short",
    base64.urlsafe_b64encode(os.urandom(31)).decode().rstrip("="),  # 31 bytes
    base64.urlsafe_b64encode(os.urandom(33)).decode().rstrip("="),  # 33 bytes
    new_state_key()[:-1] + "B",  # 43 characters whose spare bits are set: not the canonical form
    "z" * 64,
)
NOT_A_KEY = (
    "AGENT_SDK_STATE_KEY is not a state key (base64url of 32 random bytes, 43 characters, or 64 hex digits); make "
    "one with `agent-sdk state-key --out PATH` (or AGENT_SDK_STATE_KEY=$(agent-sdk state-key))"
)


def test_a_malformed_key_in_the_environment_is_one_sentence_that_does_not_echo_it(tmp_path: Path) -> None:
    for bad in MALFORMED:
        with pytest.raises(StateKeyInvalid) as refused:
            check_state_key(ServeSettings(state_key=bad, state_root=tmp_path))  # pyright: ignore[reportArgumentType]
        assert str(refused.value) == NOT_A_KEY
    said = _refusal(env={"AGENT_SDK_STATE_KEY": MALFORMED[1]}, tmp_path=tmp_path)
    assert said == f"agent-sdk: error: {NOT_A_KEY}" and MALFORMED[1] not in said


def test_a_key_file_others_may_read_or_that_is_missing_is_refused(tmp_path: Path) -> None:
    key = tmp_path / "state.key"
    made = cli("state-key", "--out", str(key))
    assert made.returncode == 0, made.stderr
    assert key.stat().st_mode & 0o777 == 0o600 and key.read_text().strip() not in made.stdout
    again = cli("state-key", "--out", str(key))  # a deployment's key is never replaced
    assert again.returncode == 1 and "already exists" in again.stderr
    key.chmod(0o644)
    said = _refusal("--state-key-file", str(key), env={}, tmp_path=tmp_path)
    assert said == (
        f"agent-sdk: error: the state key file {key} may be read by others (mode 0644); make it private with "
        f"`chmod 600 {key}`"
    )
    missing = _refusal("--state-key-file", str(tmp_path / "nowhere.key"), env={}, tmp_path=tmp_path)
    assert missing.startswith(f"agent-sdk: error: cannot read the state key file {tmp_path / 'nowhere.key'}: ")
    printed = cli("state-key")
    assert printed.returncode == 0 and len(parse_state_key(printed.stdout, "stdout")) == 32


def _session_id(served_url: str) -> str:
    import httpx2

    headers = {**HANDSHAKE, "Authorization": f"Bearer {BEARER}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
    answer = httpx2.post(f"{served_url}/v1/mcp/tools", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def _body(token: str) -> str:
    """The base64url body of a sealed value (after its last dot)."""
    return token.rpartition(".")[2]


def _honours(served_url: str, session: str) -> bool:
    """Whether a replica opens `session` (its GET stream starts: 200) rather than refusing it as not issued
    here (404)."""
    import httpx2

    headers = {"Authorization": f"Bearer {BEARER}", "Mcp-Session-Id": session, "Accept": "text/event-stream"}
    with httpx2.stream("GET", f"{served_url}/v1/mcp/tools", headers=headers, timeout=30) as answer:
        assert answer.status_code in (200, 404), answer.status_code
        return answer.status_code == 200


def _everything_in(redis: Redis) -> str:
    """Every key name and value in Redis, as one text."""
    out: list[str] = []
    for name in redis.scan_iter(count=1000):
        kind = redis.type(name).decode()
        read = {
            "string": redis.get,
            "hash": redis.hgetall,
            "zset": lambda n: redis.zrange(n, 0, -1, withscores=True),  # pyright: ignore[reportUnknownLambdaType]
            "set": redis.smembers,
            "list": lambda n: redis.lrange(n, 0, -1),  # pyright: ignore[reportUnknownLambdaType]
            "stream": redis.xrange,
        }[kind]
        value: object = read(name)
        out.append(f"{name!r} {value!r}")
    return "\n".join(out)


def test_replicas_given_one_key_by_file_or_environment_share_sealed_ids_and_redis_holds_no_key(
    tmp_path: Path,
) -> None:
    project = make_project(tmp_path / "project")
    key_file = tmp_path / "state.key"
    assert cli("state-key", "--out", str(key_file)).returncode == 0
    text = key_file.read_text().strip()
    key = parse_state_key(text, "the file")
    with redis_server(tmp_path / "redis") as server:
        raw = Redis.from_url(server.url)
        raw.set("agent-sdk:request-state:key", os.urandom(32).hex())  # where an older version kept one in clear
        base = {"AGENT_SDK_BEARER_TOKEN": BEARER, "AGENT_SDK_STATE_URL": server.url}
        one = serve(project, tmp_path / "one", "--state-key-file", str(key_file), env=base)
        two = serve(project, tmp_path / "two", env={**base, "AGENT_SDK_STATE_KEY": text})
        other = serve(project, tmp_path / "other", env={**base, "AGENT_SDK_STATE_KEY": new_state_key()})
        try:
            session = _session_id(one.url)
            assert _honours(one.url, session) and _honours(two.url, session)  # one key, two ways of giving it
            assert not _honours(other.url, session)  # another deployment's key opens nothing
            assert _honours(one.url, _session_id(two.url))
            # Only its one canonical spelling: padded, spare bits set, another alphabet (test_sealing.py), 404 each.
            # A body whose length is a multiple of 4 has no spare bits to set: take a session id whose body has some.
            made = itertools.chain([session], (_session_id(one.url) for _ in range(20)))  # made one at a time
            spare = next(s for s in made if len(_body(s)) % 4 in (2, 3))
            spellings = [s for s in _other_spellings(spare) if s.isprintable() and " " not in s]  # header-safe
            assert _honours(two.url, spare)
            assert len(spellings) >= 8 and [s for s in spellings if _honours(two.url, s)] == []
            stored = _everything_in(raw)
            assert "agent-sdk:request-state:key" not in stored  # the old clear copy is gone
            for shown in (text, key.hex(), repr(key)[2:-1], base64.b64encode(key).decode().rstrip("=")):
                assert shown not in stored
            for replica in (one, two, other):
                assert text not in replica.log_text() and key.hex() not in replica.log_text()
        finally:
            for replica in (one, two, other):
                replica.stop()
            raw.close()


def test_one_process_needs_no_key_and_keeps_it_under_its_state_root(tmp_path: Path) -> None:
    served = serve(make_project(tmp_path / "project"), tmp_path / "state")
    try:
        key_file = tmp_path / "state" / "request-state.key"
        assert key_file.stat().st_mode & 0o777 == 0o600
        assert len(parse_state_key(key_file.read_text(), str(key_file))) == 32
    finally:
        served.stop()
