"""The OAuth refresh race across replicas: two `agent-sdk serve --state-url` replicas share one grant in
Redis (logged in once with `agent-sdk mcp oauth --store`), oidc-provider rotates the refresh token on
every use and treats a reused one as theft, and the access token lives 4 s. Rounds of 20 concurrent
direct calls, split over both replicas, run past two expiries: 0 `invalid_grant`, 0 failed calls, no
new login, and the server saw at most one refresh per expiry."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.oauth.peers import AuthServer, ResourceServer

from ..conftest import assert_clean
from ..replicas import BEARER, RedisServer, oauth_project, redis_server, replica

pytestmark = [pytest.mark.anyio, pytest.mark.peers]

TTL = 4
ACCESS_TOKEN_TTL = TTL  # the auth_server fixture's (conftest.py)
CALLS = 20
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


async def test_two_replicas_refresh_one_rotating_grant_in_redis_without_invalid_grant(
    tmp_path: Path, auth_server: AuthServer, resource: ResourceServer, redis: RedisServer
) -> None:
    project = oauth_project(tmp_path / "project", resource.url)
    cli = str(Path(sys.executable).parent / "agent-sdk")
    login = await anyio.run_process(
        [cli, "mcp", "oauth", "docs", "--dir", str(project), "--non-interactive", "--store"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "AGENT_SDK_SECRETS_URL": redis.url},
        check=False,
    )
    assert login.returncode == 0, login.stderr.decode()
    (project / ".agent-sdk" / "mcp-auth.json").unlink()  # the replicas may only use what is in Redis
    logged_in = time.time()
    before = auth_server.stats()
    replicas = [replica(project, tmp_path / f"r{i}", redis.url) for i in range(2)]
    serving_since = time.time()
    ok, failures = 0, list[str]()
    try:
        clients = [
            httpx2.AsyncClient(base_url=r.url, headers={"Authorization": f"Bearer {BEARER}"}, timeout=30)
            for r in replicas
        ]

        async def call(i: int) -> None:
            nonlocal ok
            response = await clients[i % 2].post("/v1/tools/echo", json={"input": {"text": f"call {i}"}})
            if response.status_code == 200 and not response.json()["isError"]:
                ok += 1
            else:
                failures.append(response.text[:300])

        rounds = 0
        with anyio.fail_after(90):
            while time.time() < serving_since + 2 * TTL + 2.5:  # two expiries while both replicas serve
                async with anyio.create_task_group() as tg:
                    for i in range(CALLS):
                        tg.start_soon(call, i)
                rounds += 1
        for client in clients:
            await client.aclose()
    finally:
        for served in replicas:
            served.stop()
    after = auth_server.stats()
    refreshes = after["grants"].get("refresh_token", 0) - before["grants"].get("refresh_token", 0)
    invalid = after["errors"].get("invalid_grant", 0) - before["errors"].get("invalid_grant", 0)
    expiries = math.ceil((time.time() - logged_in) / TTL)
    print(f"oauth across replicas: rounds={rounds} ok={ok} failed={len(failures)}", end=" ")
    print(f"refreshes={refreshes} (expiries: {expiries}) invalid_grant={invalid}")
    assert failures == [] and ok == CALLS * rounds
    assert invalid == 0
    assert after["codes"] == before["codes"]  # no new login
    assert 2 <= refreshes <= expiries  # the token did expire (twice) and one replica refreshed each time
    for served in replicas:
        assert_clean(served.log_text(), [BEARER])
