"""`FileTokenStore`: `<state_root>/mcp-auth.json`, mode 0600, atomic replace, file locks across processes.

Layout: `{"version": 1, "grants": {"<connection>": {"<resource URL>": <Grant.to_json()>}}}`; a principal's own
grant (`grants="per_principal"`) sits under `"<connection>@<principal>"` (`StoreKey.holder`). A grant
moved to the deployment store with `--store` leaves a *pointer* in its place,
`{"version": 1, "home": "keyring" | "redis", "home_name": "<store name>"}`, never its tokens: one
grant, one home (`LocalStore` reads through the pointer).
Two lock files sit beside it: `mcp-auth.json.lock` guards each read-modify-write (held for
milliseconds), and `mcp-auth.<digest>.refresh.lock` per key is the refresh single-flight lock (held
across a token request).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import filelock

from .._exceptions import StoreCorrupt, StoreError
from .._grant import Grant, StoreKey
from .._shared import write_private
from ._store import KeyLocks

__all__ = ["FileTokenStore"]

FILE_NAME = "mcp-auth.json"
_T = TypeVar("_T")


class FileTokenStore:
    """Grants in one JSON file under the state root; safe for several processes on one machine."""

    def __init__(self, state_root: Path | str, *, lock_timeout: float = 60.0) -> None:
        self._root = Path(state_root)
        self.path = self._root / FILE_NAME
        self._lock_timeout = lock_timeout
        self._locks = KeyLocks()

    @property
    def name(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    async def __aenter__(self) -> FileTokenStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        return None

    async def load(self, key: StoreKey) -> Grant | None:
        record = await self._record(key)
        if record is None:
            return None
        pointer = _pointer(record)
        if pointer is not None:
            raise StoreError(
                f"the grant for {key} lives in {pointer[1]} (moved there with --store); {self.name} only points "
                "there, so read it through `oauth.LocalStore`"
            )
        return Grant.from_json(record, self.name)

    async def home_of(self, key: StoreKey) -> tuple[str, str] | None:
        """`(kind, store name)` when `key` was moved to a deployment store (`keyring` or `redis`), else None."""
        record = await self._record(key)
        return None if record is None else _pointer(record)

    async def point_to(self, key: StoreKey, kind: str, name: str) -> None:
        """Replace whatever is held for `key` by a pointer to the deployment store `kind` named `name`."""

        def write(data: dict[str, dict[str, Any]]) -> bool:
            data.setdefault(key.holder, {})[key.resource] = {"version": 1, "home": kind, "home_name": name}
            return True

        await self._run(lambda: self._modify(write))

    async def _record(self, key: StoreKey) -> object | None:
        data = await self._run(self._read_all)
        return data.get(key.holder, {}).get(key.resource)

    async def save(self, grant: Grant) -> None:
        def write(data: dict[str, dict[str, Any]]) -> bool:
            data.setdefault(grant.key.holder, {})[grant.key.resource] = grant.to_json()
            return True

        await self._run(lambda: self._modify(write))

    async def delete(self, key: StoreKey) -> bool:
        def remove(data: dict[str, dict[str, Any]]) -> bool:
            per_connection = data.get(key.holder, {})
            if per_connection.pop(key.resource, None) is None:
                return False
            if not per_connection:
                data.pop(key.holder, None)
            return True

        return await self._run(lambda: self._modify(remove))

    async def keys(self) -> list[StoreKey]:
        data = await self._run(self._read_all)
        return sorted(StoreKey.of_holder(h, r) for h, per in data.items() for r in per)

    @asynccontextmanager
    async def lock(self, key: StoreKey) -> AsyncGenerator[None]:
        digest = hashlib.sha256(f"{key.holder}\0{key.resource}".encode()).hexdigest()[:16]
        path = self._root / f"mcp-auth.{digest}.refresh.lock"
        async with self._locks.hold(key):
            await self._run(self._ensure_root)
            # thread_local=False + not a singleton: one flock per acquisition, so another store object
            # in this process contends like another process would.
            lock = filelock.FileLock(
                path, timeout=self._lock_timeout, mode=0o600, thread_local=False, is_singleton=False
            )
            await self._run(lock.acquire)
            try:
                yield
            finally:
                await anyio.to_thread.run_sync(lock.release)

    # -- blocking helpers (run in a worker thread) --

    async def _run(self, fn: Callable[[], _T]) -> _T:
        try:
            return await anyio.to_thread.run_sync(fn)
        except filelock.Timeout:
            raise StoreError(f"timed out waiting for the lock on {self.name}; is another login stuck?") from None
        except OSError as exc:
            raise StoreError(f"cannot use the token store {self.name}: {exc.strerror or exc}") from None

    def _ensure_root(self) -> None:
        self._root.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _read_all(self) -> dict[str, dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except ValueError:
            raise StoreCorrupt(
                f"{self.name} is not valid JSON; move it aside and log in again with `agent-sdk mcp oauth NAME`"
            ) from None
        grants = data.get("grants") if isinstance(data, dict) else None
        if not isinstance(grants, dict) or not all(isinstance(v, dict) for v in grants.values()):
            raise StoreCorrupt(
                f"{self.name} is not an agent-sdk token file; move it aside and log in again with "
                "`agent-sdk mcp oauth NAME`"
            )
        return grants

    def _modify(self, change: Callable[[dict[str, dict[str, Any]]], bool]) -> bool:
        self._ensure_root()
        with filelock.FileLock(
            str(self.path) + ".lock", timeout=self._lock_timeout, mode=0o600, thread_local=False, is_singleton=False
        ):
            data = self._read_all()
            changed = change(data)
            if changed:
                self._write_all(data)
            return changed

    def _write_all(self, grants: dict[str, dict[str, Any]]) -> None:
        payload = json.dumps({"version": 1, "grants": grants}, indent=2, sort_keys=True).encode()
        write_private(self.path, payload)  # atomic: readers see the old file or the new one, never half


def _pointer(record: object) -> tuple[str, str] | None:
    if isinstance(record, dict) and "home" in record:
        kind, name = record.get("home"), record.get("home_name")
        if isinstance(kind, str) and isinstance(name, str):
            return kind, name
    return None
