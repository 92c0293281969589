"""Per-user grants across two `serve --state-url` replicas sharing a real Redis: a sign-in link one replica
gave is good once on any of them, a login started on one is finished by the other's callback, and the
grant it stores (in Redis, under the principal's key) serves that principal's calls on both."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.oauth.peers import ResourceServer

from .conftest import Served, assert_clean, serve
from .per_user import PEERS, peer_env, per_user_project, principal_of, sign_in_url_in, text_of, ts_peer_signs_in, whoami
from .replicas import STATE_KEY, RedisServer, redis_server


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, resource: ResourceServer, redis: RedisServer
) -> Iterator[tuple[Served, Served]]:
    root = tmp_path_factory.mktemp("per-user-replicas")
    project = per_user_project(root / "project", resource.url)
    env = peer_env(AGENT_SDK_STATE_URL=redis.url, AGENT_SDK_STATE_KEY=STATE_KEY)
    first = serve(project, root / "state-a", env=env)
    try:
        second = serve(project, root / "state-b", env=env)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()
    for served in (first, second):
        assert_clean(served.log_text(), list(PEERS.values()))


def test_a_sign_in_link_of_one_replica_opens_once_on_any(replicas: tuple[Served, Served]) -> None:
    first, second = replicas
    with httpx2.Client(timeout=30.0) as http:
        url = sign_in_url_in(text_of(whoami(http, first.url, "carol")))
        on_second = url.replace(first.url, second.url)
        opened = http.get(on_second, headers={"authorization": f"Bearer {PEERS['carol']}"})
        assert opened.status_code == 302  # sealed with the deployment's key: the other replica opens it
        again = http.get(url, headers={"authorization": f"Bearer {PEERS['carol']}"})
        assert again.status_code == 400 and "already used" in again.text  # used once, deployment-wide


@pytest.mark.anyio
async def test_a_login_started_on_one_replica_is_finished_by_the_other_and_serves_both(
    replicas: tuple[Served, Served], redis: RedisServer
) -> None:
    first, second = replicas
    # The TypeScript SDK peer calls the first replica; the authorization server's redirect goes to the second.
    report = await ts_peer_signs_in(f"{first.url}/v1/mcp/tools", "dave", "legacy", callback_base=second.url)
    assert report["asked"]["code"] == -32042
    assert report["result"]["content"][0]["text"] == "dave"  # the retry on the first replica, dave's own grant
    with httpx2.Client(timeout=30.0) as http:
        on_second = whoami(http, second.url, "dave")
        others = whoami(http, second.url, "erin")
    assert (on_second["isError"], on_second["content"][0]["text"]) == (False, "dave")
    assert others["isError"] is True and "sign_in_required" in text_of(others)  # nobody else got dave's grant
    stored = await _redis_keys(redis)
    assert any(key.startswith(f"agent-sdk:mcp-oauth:docs@{principal_of('dave')}:") for key in stored), stored


async def _redis_keys(redis: RedisServer) -> list[str]:
    import redis.asyncio as redis_asyncio

    client = redis_asyncio.Redis.from_url(redis.url, decode_responses=True)
    try:
        return sorted(await client.keys("agent-sdk:mcp-oauth:*"))
    finally:
        await client.aclose()
