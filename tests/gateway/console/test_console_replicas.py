"""The console's browser login across replicas: two `agent-sdk serve --state-url` replicas on one real
Redis behind nginx (`deploy/nginx.conf`), oidc-provider as the authorization server. A login started
on one replica is finished by the other, the grant then serves calls on both, a replayed redirect is
refused, and the started login sits in Redis sealed: no verifier, state or client in the clear."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx2
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from redis import Redis

from gateway.state.state_key import parse_state_key
from tests.oauth.helpers import authorize
from tests.oauth.peers import AuthServer, ResourceServer

from ..conftest import Served, assert_clean
from ..replicas import BEARER, OPERATOR, STATE_KEY, RedisServer, nginx_front, oauth_project, redis_server, replica

pytestmark = [pytest.mark.peers]

LOGIN_PREFIX = "agent-sdk.login1."


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


def _unseal(raw: str) -> dict[str, object]:
    """What the replicas sealed, opened with the deployment key they share (`AGENT_SDK_STATE_KEY`)."""
    key = parse_state_key(STATE_KEY, "the test's key")
    body = raw[len(LOGIN_PREFIX) :]
    sealed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    plain = AESGCM(key).decrypt(sealed[:12], sealed[12:], b"agent-sdk requestState v1" + LOGIN_PREFIX.encode())
    return json.loads(plain)


def _served_by(access_log: Path, path: str, replicas: list[Served]) -> Served:
    """The replica nginx sent the last request for `path` to (its access log's `$upstream_addr`; nginx writes
    the line after the answer has gone, so wait for it)."""
    for _ in range(100):
        lines = [entry for entry in access_log.read_text().splitlines() if entry.endswith(f" {path}")]
        if lines:
            break
        time.sleep(0.05)
    line = lines[-1]
    upstream = line.split('"')[1]
    return next(r for r in replicas if upstream == f"127.0.0.1:{r.port}")


def _echo(served: Served, text: str) -> str:
    with served.client({"Authorization": f"Bearer {BEARER}"}) as http:
        answer = http.post("/v1/tools/echo", json={"input": {"text": text}})
    assert answer.status_code == 200, answer.text
    assert not answer.json()["isError"], answer.text
    return answer.text


def test_a_login_started_on_one_replica_is_finished_by_another_and_serves_both(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, redis: RedisServer
) -> None:
    project = oauth_project(tmp_path / "project", resource.url)
    replicas = [replica(project, tmp_path / f"r{i}", redis.url) for i in range(2)]
    raw_redis = Redis.from_url(redis.url)
    secrets: list[str] = [BEARER, OPERATOR]
    before = auth_server.stats()
    try:
        with nginx_front(tmp_path / "nginx", [r.port for r in replicas], access_log=True) as front:
            headers = {"Authorization": f"Bearer {OPERATOR}", "Origin": front}
            with httpx2.Client(base_url=front, headers=headers, timeout=30.0) as http:
                started = http.post("/v1/connections/docs/login", json={})
            assert started.status_code == 200, started.text
            # The browser that started the login brings its cookie back on the redirect (`console/_login.py`).
            browser = {"Cookie": "; ".join(f"{k}={v}" for k, v in started.cookies.items())}
            starter = _served_by(tmp_path / "nginx" / "access.log", "/v1/connections/docs/login", replicas)
            finisher = next(r for r in replicas if r is not starter)
            authorization_url = started.json()["authorizationUrl"]
            query = dict(parse_qsl(urlsplit(authorization_url).query))
            callback_uri = f"{front}/v1/oauth/callback"
            assert query["redirect_uri"] == callback_uri
            state = query["state"]

            # In Redis: one sealed value under the state's digest, expiring; nothing readable in it.
            keys = [k.decode() for k in raw_redis.keys("agent-sdk:console:login:*")]
            assert keys == [f"agent-sdk:console:login:{hashlib.sha256(state.encode()).hexdigest()}"]
            assert 0 < raw_redis.pttl(keys[0]) <= 600_000
            raw = raw_redis.get(keys[0]).decode()  # type: ignore[union-attr]
            assert raw.startswith(LOGIN_PREFIX)
            opened = _unseal(raw)
            verifier = str(opened["verifier"])
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            assert challenge == query["code_challenge"]  # the sealed value is this login's PKCE verifier
            client_id = query["client_id"]
            for clear in (verifier, state, client_id, resource.url, auth_server.issuer):
                assert clear not in raw
            secrets += [verifier, state]

            redirect = authorize(authorization_url, callback_uri)
            code = dict(parse_qsl(urlsplit(redirect).query))["code"]
            secrets.append(code)
            callback = redirect[len(front) :]
            with finisher.client(browser) as http:
                done = http.get(callback)
            assert done.status_code == 200, done.text
            assert "docs is logged in" in done.text
            assert raw_redis.keys("agent-sdk:console:login:*") == []  # taken
            assert raw_redis.zcard("agent-sdk:console:logins") == 0
            with starter.client(browser) as http:
                replayed = http.get(callback)
            assert replayed.status_code == 400
            assert "matches no login started from the console" in replayed.text

            # The grant, in Redis, serves calls on both replicas and through nginx.
            for served in (finisher, starter):
                assert "replica" in _echo(served, "replica")
            with httpx2.Client(base_url=front, headers={"Authorization": f"Bearer {BEARER}"}, timeout=30.0) as http:
                for i in range(4):
                    through = http.post("/v1/tools/echo", json={"input": {"text": f"front {i}"}})
                    assert through.status_code == 200 and not through.json()["isError"], through.text
    finally:
        for served in replicas:
            served.stop()
    after = auth_server.stats()
    assert after["codes"] - before["codes"] == 1  # one login, one code redeemed
    for served in replicas:
        assert_clean(served.log_text(), secrets)
