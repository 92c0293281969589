"""Both stores of started console logins (`gateway/state/pending_logins.py`), in process: the memory one and the
Redis one on a real `redis-server`. Each takes a login once, holds at most `MAX_PENDING` (the oldest go
first: a flood of started logins cannot grow it, in Redis per deployment), and the Redis one refuses a
value sealed with another deployment's key or one whose slot does not match its state."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from redis import Redis

from gateway.errors import StateUnavailable
from gateway.state._redis import redis_client
from gateway.state.pending_logins import MAX_PENDING, MemoryPendingLogins, PendingLogins, RedisPendingLogins
from gateway.state.request_state import RequestStateRefused, RequestStates, SealedState
from oauth import ClientRegistration, LoginStart, ServerMetadata, StoreKey
from oauth._shared import Secret
from tests.conftest import free_port

from ..replicas import RedisServer, redis_server

pytestmark = [pytest.mark.anyio]

REDIRECT = "https://gateway.example/v1/oauth/callback"
SERVER = ServerMetadata(
    "https://as.example", "https://as.example/auth", "https://as.example/token", "https://as.example/reg", None,
    None, ("client_secret_post",), False, True, "https://as.example/.well-known/oauth-authorization-server",
)  # fmt: skip


def _start(i: int) -> LoginStart:
    client = ClientRegistration(f"client-{i}", Secret(f"client-secret-{i}"), "client_secret_post", "dynamic", REDIRECT)
    return LoginStart(
        StoreKey("docs", "https://mcp.example/mcp"), SERVER, client, REDIRECT, "https://mcp.example/mcp",
        Secret(f"state-{i}"), Secret(f"verifier-{i}"), f"https://as.example/auth?state=state-{i}",
    )  # fmt: skip


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@asynccontextmanager
async def _redis_store(redis: RedisServer, key: bytes) -> AsyncIterator[RedisPendingLogins]:
    client = redis_client(redis.url)
    try:
        yield RedisPendingLogins(client, RequestStates(key), url=redis.url)
    finally:
        await client.aclose()


@asynccontextmanager
async def _store(kind: str, redis: RedisServer) -> AsyncIterator[PendingLogins]:
    if kind == "memory":
        yield MemoryPendingLogins()
        return
    Redis.from_url(redis.url).flushdb()
    async with _redis_store(redis, os.urandom(32)) as store:
        yield store


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_login_is_taken_once_and_a_flood_keeps_only_the_newest(kind: str, redis: RedisServer) -> None:
    async with _store(kind, redis) as store:
        for i in range(MAX_PENDING + 5):
            await store.remember(_start(i))
        for i in range(5):
            assert await store.take(f"state-{i}") is None  # the oldest made room
        assert await store.take("state-5") == _start(5)
        assert await store.take("state-5") is None  # once
        assert await store.take("") is None and await store.take("state-unknown") is None
        newest = await store.take(f"state-{MAX_PENDING + 4}")
        assert newest is not None and newest.client.client_secret == Secret(f"client-secret-{MAX_PENDING + 4}")
    if kind == "redis":
        raw = Redis.from_url(redis.url)
        assert len(raw.keys("agent-sdk:console:login:*")) == MAX_PENDING - 2  # the bound is the deployment's
        assert raw.zcard("agent-sdk:console:logins") == MAX_PENDING - 2
        values = b"".join(raw.get(k) or b"" for k in raw.keys("agent-sdk:console:login:*"))
        assert b"verifier-" not in values and b"client-secret-" not in values and b"state-" not in values


async def test_two_replicas_share_the_bound_and_another_deployment_key_opens_nothing(redis: RedisServer) -> None:
    Redis.from_url(redis.url).flushdb()
    key = os.urandom(32)
    async with _redis_store(redis, key) as a, _redis_store(redis, key) as b, _redis_store(redis, os.urandom(32)) as c:
        for i in range(MAX_PENDING):
            await (a if i % 2 else b).remember(_start(i))
        await a.remember(_start(MAX_PENDING))
        assert await b.take("state-0") is None  # dropped by a's add: one bound for both
        assert await b.take("state-1") == _start(1)  # started on a, finished on b
        assert await a.take("state-1") is None
        assert await c.take("state-2") is None  # sealed with another key: no login, and nothing leaks
        assert await a.take("state-2") is None  # taken (and refused) by c: a state is used once, whoever reads it
        raw = Redis.from_url(redis.url)
        slot = "agent-sdk:console:login:" + hashlib.sha256(b"state-3").hexdigest()
        raw.set(slot, raw.get("agent-sdk:console:login:" + hashlib.sha256(b"state-4").hexdigest()) or b"")
        assert await a.take("state-3") is None  # another login's value in this state's slot
        assert await a.take("state-4") == _start(4)


async def test_redis_away_is_one_sentence_naming_no_password() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"
    client = redis_client(url)
    try:
        store = RedisPendingLogins(client, RequestStates(os.urandom(32)), url=url)
        with pytest.raises(StateUnavailable) as caught:
            await store.remember(_start(1))
        with pytest.raises(StateUnavailable):
            await store.take("state-1")
    finally:
        await client.aclose()
    message = str(caught.value)
    assert "is unavailable" in message and "retry the login" in message and "hunter2" not in message


async def test_a_sealed_login_and_a_request_state_never_pass_for_each_other() -> None:
    sealer = RequestStates(os.urandom(32))
    login = sealer.seal_login(_start(1).to_json())
    assert sealer.open_login(login) == _start(1).to_json()
    assert "verifier-1" not in login and "client-secret-1" not in login
    assert sealer.open_login(sealer.seal(SealedState("someone", "echo", None))) is None
    assert sealer.open_login(login[:-4] + "AAAA") is None  # altered
    with pytest.raises(RequestStateRefused):
        await sealer.open(login, "someone", "echo")
