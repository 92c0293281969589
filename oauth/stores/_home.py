"""Where a grant lives: one home per grant, and the stores that find it.

- `deployment_store()`: the store `--store` moves grants to (the OS keyring, or Redis when
  `AGENT_SDK_SECRETS_URL=redis://...`).
- `LocalStore`: `<state root>/mcp-auth.json`, reading through the pointer a `--store` login leaves
  there, so the CLI and a file-backed `serve` on this machine use the one copy in the deployment
  store (and its lock) instead of a second copy that would rotate apart from it.
- `serving_store()`: what `agent-sdk serve` reads (`AGENT_SDK_TOKEN_STORE`).
- `check_store()`: reach a store before a browser login, so a bad URL, Redis down or no keyring is
  found before the person logs in, not after.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from .._exceptions import StoreError
from .._grant import Grant, StoreKey
from ._file_store import FileTokenStore
from ._keyring_store import KeyringTokenStore
from ._redis_store import RedisTokenStore
from ._store import TokenStore

__all__ = ["LocalStore", "check_store", "deployment_store", "home_kind", "serving_store"]

SECRETS_URL_ENV = "AGENT_SDK_SECRETS_URL"
TOKEN_STORE_ENV = "AGENT_SDK_TOKEN_STORE"


def deployment_store(environ: Mapping[str, str] | None = None) -> TokenStore:
    """The deployment secret store for `--store`: Redis when `AGENT_SDK_SECRETS_URL=redis://...`, else the keyring.

    Raises `StoreError` for a URL that is not Redis.
    """
    env = os.environ if environ is None else environ
    url = env.get(SECRETS_URL_ENV, "").strip()
    if not url:
        return KeyringTokenStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisTokenStore(url)
    raise StoreError(f"{SECRETS_URL_ENV} must be a redis://, rediss:// or unix:// URL")


def home_kind(store: TokenStore) -> str:
    """`redis`, `keyring` or `file`: the kind a pointer records."""
    if isinstance(store, RedisTokenStore):
        return "redis"
    if isinstance(store, KeyringTokenStore):
        return "keyring"
    return "file"


async def check_store(store: TokenStore) -> None:
    """Reach `store` once (list its keys); raises its `StoreError` / `KeyringUnavailable` sentence."""
    await store.keys()


class LocalStore:
    """`mcp-auth.json` under a state root, reading through `--store` pointers to the deployment store.

    A grant held in the file is used in place. A pointer sends `load`, `save`, `lock` and `delete`
    to the deployment store named by this process's environment, which must be the kind the
    pointer names (a pointer to Redis without `AGENT_SDK_SECRETS_URL` is a `StoreError` that says so).
    """

    def __init__(self, state_root: Path | str, environ: Mapping[str, str] | None = None) -> None:
        self.file = FileTokenStore(state_root)
        self._environ = environ
        self._remote: TokenStore | None = None

    @property
    def name(self) -> str:
        return self.file.name

    def __repr__(self) -> str:
        return f"LocalStore({self.file.name!r})"

    async def __aenter__(self) -> LocalStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._remote is not None:
            await self._remote.aclose()
            self._remote = None

    async def home(self, key: StoreKey) -> TokenStore:
        """The store that holds `key`'s grant: the file, or the deployment store a pointer names."""
        pointer = await self.file.home_of(key)
        if pointer is None:
            return self.file
        kind, name = pointer
        if self._remote is None:
            env = os.environ if self._environ is None else self._environ
            if kind == "redis" and not env.get(SECRETS_URL_ENV, "").strip():
                raise StoreError(
                    f"the grant for {key} was moved to {name} with --store; set {SECRETS_URL_ENV} to that Redis "
                    "to use it from here"
                )
            self._remote = deployment_store(env)
        if home_kind(self._remote) != kind:
            raise StoreError(
                f"the grant for {key} was moved to {name} with --store, but this process's deployment store is "
                f"{self._remote.name}; set {SECRETS_URL_ENV} as it was for that login"
            )
        return self._remote

    async def load(self, key: StoreKey) -> Grant | None:
        return await (await self.home(key)).load(key)

    async def save(self, grant: Grant) -> None:
        await (await self.home(grant.key)).save(grant)

    async def delete(self, key: StoreKey) -> bool:
        """Delete the grant at its home and the pointer to it."""
        home = await self.home(key)
        deleted = await home.delete(key)
        if home is not self.file:
            deleted = await self.file.delete(key) or deleted
        return deleted

    async def keys(self) -> list[StoreKey]:
        return await self.file.keys()

    @asynccontextmanager
    async def lock(self, key: StoreKey) -> AsyncGenerator[None]:
        async with (await self.home(key)).lock(key):
            yield

    async def move_to(self, target: TokenStore, grant: Grant) -> None:
        """One grant, one home: save `grant` in `target` and leave only a pointer here."""
        await target.save(grant)
        await self.file.point_to(grant.key, home_kind(target), target.name)


def serving_store(state_root: Path | str, environ: Mapping[str, str] | None = None) -> TokenStore:
    """The store a serving gateway reads tokens from (and writes rotated refresh tokens back to).

    `AGENT_SDK_TOKEN_STORE=file|keyring|redis` chooses; unset, it is Redis when
    `AGENT_SDK_SECRETS_URL` is set (replicas share one store) and otherwise the local
    `mcp-auth.json` under `state_root` (reading through `--store` pointers).

    Raises `StoreError` for an unknown choice or a Redis choice without a Redis URL.
    """
    env = os.environ if environ is None else environ
    choice = env.get(TOKEN_STORE_ENV, "").strip().lower()
    if not choice:
        choice = "redis" if env.get(SECRETS_URL_ENV, "").strip() else "file"
    if choice == "file":
        return LocalStore(state_root, environ)
    if choice == "keyring":
        return KeyringTokenStore()
    if choice == "redis":
        if not env.get(SECRETS_URL_ENV, "").strip():
            raise StoreError(f"{TOKEN_STORE_ENV}=redis needs {SECRETS_URL_ENV}=redis://host:port/db")
        return deployment_store(env)
    raise StoreError(f"{TOKEN_STORE_ENV} must be file, keyring or redis, got {choice[:20]!r}")
