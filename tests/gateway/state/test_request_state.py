"""The sealed `requestState`: one key per deployment, bound to principal and tool, expiring, good once."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import StateUnavailable
from gateway.settings import ServeSettings
from gateway.state._redis import redis_client
from gateway.state.request_state import RedisUsedStates, RequestStateRefused, RequestStates, SealedState
from gateway.state.state_key import load_state_key, parse_state_key

from ..replicas import STATE_KEY, redis_server

pytestmark = pytest.mark.anyio

STATE = SealedState(principal="bearer:alice", tool="ask_name", connection="asking", upstream="upstream-opaque")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_state_opens_once_for_its_principal_and_tool_until_it_expires(tmp_path: Path) -> None:
    clock = Clock()
    states = RequestStates(await load_state_key(ServeSettings(state_root=tmp_path)), ttl_s=60, clock=clock)
    sealed = states.seal(STATE)
    assert "upstream-opaque" not in sealed and "alice" not in sealed  # sealed, not merely signed
    with pytest.raises(RequestStateRefused, match="issued to another principal"):
        await states.open(sealed, "bearer:mallory", "ask_name")
    with pytest.raises(RequestStateRefused, match="issued for another tool, not 'ask_model'"):
        await states.open(sealed, "bearer:alice", "ask_model")
    assert await states.open(sealed, "bearer:alice", "ask_name") == STATE
    with pytest.raises(RequestStateRefused, match="already used"):
        await states.open(sealed, "bearer:alice", "ask_name")
    late = states.seal(STATE)
    clock.now += 61
    with pytest.raises(RequestStateRefused, match="it has expired"):
        await states.open(late, "bearer:alice", "ask_name")
    assert repr(states) == "RequestStates(key=***)"


async def test_the_file_key_is_made_once_0600_and_another_deployment_cannot_open_its_states(tmp_path: Path) -> None:
    key = await load_state_key(ServeSettings(state_root=tmp_path / "one"))
    assert await load_state_key(ServeSettings(state_root=tmp_path / "one")) == key
    assert (tmp_path / "one" / "request-state.key").stat().st_mode & 0o777 == 0o600
    sealed = RequestStates(key).seal(STATE)
    other = RequestStates(await load_state_key(ServeSettings(state_root=tmp_path / "two")))
    with pytest.raises(RequestStateRefused, match="not issued by this gateway, or it was altered"):
        await other.open(sealed, "bearer:alice", "ask_name")


async def test_replicas_given_one_key_open_each_others_states_and_refuse_a_replay_at_another(tmp_path: Path) -> None:
    with redis_server(tmp_path / "redis") as server:
        one, two = redis_client(server.url), redis_client(server.url)
        try:
            key = parse_state_key(STATE_KEY, "the test's key")
            first = RequestStates(key, RedisUsedStates(one))
            second = RequestStates(key, RedisUsedStates(two))
            sealed = first.seal(STATE)
            assert await second.open(sealed, "bearer:alice", "ask_name") == STATE
            with pytest.raises(RequestStateRefused, match="already used"):
                await first.open(sealed, "bearer:alice", "ask_name")
        finally:
            await one.aclose()
            await two.aclose()


@pytest.mark.peers
async def test_while_redis_is_away_a_state_or_session_check_is_state_unavailable_then_works_again(
    tmp_path: Path,
) -> None:
    """Each check that reads or claims in Redis (a `requestState` retry, a session's ended mark, its DELETE) is
    `StateUnavailable` with a sentence while Redis is away, never redis-py's own error (a 500 on the request
    path), and the same states work once Redis answers again, with the same client."""
    with redis_server(tmp_path / "redis") as server:
        client = redis_client(server.url)
        try:
            states = RequestStates(parse_state_key(STATE_KEY, "the test's key"), RedisUsedStates(client))
            sealed, session = states.seal(STATE), states.seal_session("bearer:alice", {})
            assert await states.live_session(session, "bearer:alice")
            server.kill()
            for check in (
                lambda: states.open(sealed, "bearer:alice", "ask_name"),
                lambda: states.live_session(session, "bearer:alice"),
                lambda: states.end_session(session, "bearer:alice"),
            ):
                with pytest.raises(StateUnavailable, match=r"state store is unavailable \(ConnectionError\); retry"):
                    await check()
            server.start()
            assert await states.open(sealed, "bearer:alice", "ask_name") == STATE
            assert await states.end_session(session, "bearer:alice")
            assert not await states.live_session(session, "bearer:alice")
        finally:
            await client.aclose()
