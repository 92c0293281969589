"""Where a gateway keeps its state: files under `--state-root` (one process), or Redis at `--state-url`
(every replica of a deployment; docs/deploy.md). One place decides, for every kind of state."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from oauth import TokenStore, serving_store

from .accounts.hub_keys import HubKeys, HubKeyStore
from .accounts.hub_keys_redis import RedisHubKeyStore
from .mcp.task_owners import Local, TaskOwners
from .sessions import FileSessionStore, RedisSessionStore, SessionStore
from .settings import ServeSettings
from .state._redis import redis_client
from .state.pending_logins import MemoryPendingLogins, PendingLogins, RedisPendingLogins
from .state.request_state import MemoryUsedStates, RedisUsedStates, RequestStates
from .state.state_key import forget_redis_key, load_state_key

__all__ = [
    "STATE_URL_ENV",
    "cli_token_store",
    "hub_key_store",
    "serving_hub_keys",
    "serving_pending_logins",
    "serving_request_states",
    "serving_task_owners",
    "session_store",
    "token_store",
]

STATE_URL_ENV = "AGENT_SDK_STATE_URL"


def session_store(settings: ServeSettings) -> SessionStore:
    """Sessions, continuation tokens and event logs: Redis with `state_url`, else files."""
    if settings.state_url is not None:
        return RedisSessionStore(settings.state_url.get_secret_value(), patience_s=settings.turn_lease_s)
    return FileSessionStore(settings.state_root)


def token_store(settings: ServeSettings, environ: Mapping[str, str] | None = None) -> TokenStore:
    """OAuth tokens and their refresh lock: `oauth.serving_store`, which with `state_url` defaults to the same
    Redis (unless `AGENT_SDK_SECRETS_URL` or `AGENT_SDK_TOKEN_STORE` choose otherwise).

    Raises `oauth.StoreError` for a bad choice.
    """
    state_url = settings.state_url.get_secret_value() if settings.state_url is not None else None
    return _tokens(settings.state_root, state_url, environ)


def cli_token_store(state_root: Path, environ: Mapping[str, str] | None = None) -> TokenStore:
    """The tokens a CLI command reads as the replicas do: the same Redis when `AGENT_SDK_STATE_URL` is set (a person's
    grant stored by a replica, for `pin --principal`), else the files under `state_root`."""
    env = os.environ if environ is None else environ
    return _tokens(state_root, env.get(STATE_URL_ENV, "").strip() or None, environ)


def _tokens(state_root: Path, state_url: str | None, environ: Mapping[str, str] | None) -> TokenStore:
    env = dict(os.environ if environ is None else environ)
    if state_url is not None and not env.get("AGENT_SDK_SECRETS_URL") and not env.get("AGENT_SDK_TOKEN_STORE"):
        env["AGENT_SDK_SECRETS_URL"] = state_url
    return serving_store(state_root, env)


def hub_key_store(state_root: Path, environ: Mapping[str, str] | None = None) -> HubKeyStore | RedisHubKeyStore:
    """The hub's keys for the CLI: Redis when `AGENT_SDK_STATE_URL` is set (as the replicas have it), else the file."""
    url = (os.environ if environ is None else environ).get(STATE_URL_ENV, "").strip()
    return RedisHubKeyStore(url) if url else HubKeyStore(state_root)


async def serving_hub_keys(settings: ServeSettings, stack: AsyncExitStack) -> HubKeys | None:
    """The hub's keys for a serving gateway (None unless `--hub`); a Redis copy is kept fresh until `stack` closes."""
    if not settings.hub:
        return None
    if settings.state_url is None:
        return HubKeyStore(settings.state_root)
    return await stack.enter_async_context(RedisHubKeyStore(settings.state_url.get_secret_value()).serving())


async def serving_request_states(settings: ServeSettings, stack: AsyncExitStack) -> RequestStates:
    """The sealer of `requestState`s (`gateway/state/request_state.py`) with the deployment's key (`state_key.py`, never
    Redis); used ids in Redis with `state_url`, else in memory. Its Redis client closes with `stack`.

    Raises `StateKeyInvalid` with a sentence (`serve` checks the key before it starts the app)."""
    key = await load_state_key(settings)
    if settings.state_url is None:
        return RequestStates(key, MemoryUsedStates())
    redis = redis_client(settings.state_url.get_secret_value())
    stack.push_async_callback(redis.aclose)
    await forget_redis_key(redis)
    return RequestStates(key, RedisUsedStates(redis))


def serving_pending_logins(settings: ServeSettings, sealer: RequestStates, stack: AsyncExitStack) -> PendingLogins:
    """Started console logins (`state/pending_logins.py`): in Redis sealed with `sealer` (the deployment's key) with
    `state_url`, so any replica can finish a login another started; else in memory. Its Redis client closes
    with `stack`."""
    if settings.state_url is None:
        return MemoryPendingLogins()
    url = settings.state_url.get_secret_value()
    redis = redis_client(url)
    stack.push_async_callback(redis.aclose)
    return RedisPendingLogins(redis, sealer, url=url)


async def serving_task_owners(settings: ServeSettings, local: Local, stack: AsyncExitStack) -> TaskOwners:
    """Who runs which task (`task_owners.py`): with `state_url`, this replica answers the others' follow-ups
    for its tasks over Redis until `stack` closes; else its own tasks only."""
    if settings.state_url is None:
        return TaskOwners(local)
    redis = redis_client(settings.state_url.get_secret_value())
    stack.push_async_callback(redis.aclose)
    owners = TaskOwners(local, redis)
    tg = await stack.enter_async_context(anyio.create_task_group())
    stack.callback(tg.cancel_scope.cancel)
    tg.start_soon(owners.serve)
    return owners
