"""The token store plug point (`TokenStore`) and the per-key in-process locks every store shares."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

import anyio

from .._grant import Grant, StoreKey

__all__ = ["KeyLocks", "TokenStore"]


@runtime_checkable
class TokenStore(Protocol):
    """Where grants live. Implementations: `FileTokenStore`, `KeyringTokenStore`, `RedisTokenStore`.

    `lock(key)` is the single-flight guard for refresh: held, no other task of this process *and* no
    other process sharing the store holds it for the same key. A refresh is load → refresh → save
    under that lock, so a rotating refresh token is spent exactly once.
    """

    @property
    def name(self) -> str:
        """A label for messages (a path, `OS keyring`, a Redis URL without credentials)."""
        ...

    async def load(self, key: StoreKey) -> Grant | None:
        """The grant for `key`, or None. Raises `StoreCorrupt` / `StoreError`."""
        ...

    async def save(self, grant: Grant) -> None:
        """Insert or replace the grant at `grant.key`. Raises `StoreError`."""
        ...

    async def delete(self, key: StoreKey) -> bool:
        """Remove the grant; True when there was one. Raises `StoreError`."""
        ...

    async def keys(self) -> list[StoreKey]:
        """Every key held, sorted. Raises `StoreError`."""
        ...

    def lock(self, key: StoreKey) -> AbstractAsyncContextManager[None]:
        """Exclusive access to `key` across tasks and processes (see the class docstring)."""
        ...

    async def aclose(self) -> None:
        """Release connections and files."""
        ...


class KeyLocks:
    """One `anyio.Lock` per key: the in-process half of a store's `lock()`.

    A cross-process lock alone is not enough: `filelock` is reentrant within a thread, so two tasks
    on one event loop would both "hold" it.
    """

    __slots__ = ("_locks",)

    def __init__(self) -> None:
        self._locks: dict[StoreKey, anyio.Lock] = {}

    @asynccontextmanager
    async def hold(self, key: StoreKey) -> AsyncGenerator[None]:
        lock = self._locks.setdefault(key, anyio.Lock())
        async with lock:
            yield
