"""`KeyringTokenStore`: grants in the OS keyring (the default deployment secret store for `--store`).

Names: service `agent-sdk` (override with `service=`), one entry per grant with the user name
`mcp-oauth:<connection>:<resource URL>` (a principal's own grant: `<connection>@<principal>`,
`StoreKey.holder`) holding `Grant.to_json()` as JSON, and an index entry
`mcp-oauth:index` listing the keys held (keyring has no listing call). The cross-process locks (one
per grant for refresh, one for the index's read-modify-write) are file locks, mode 0600, in `lock_dir`:
default `$XDG_RUNTIME_DIR/agent-sdk-keyring-locks`, else `<tmp>/agent-sdk-keyring-locks-<uid>`, a
0700 folder that must belong to this user (a folder someone else made is refused, not used).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import filelock
import keyring
import keyring.backend
import keyring.errors

from .._exceptions import KeyringUnavailable, StoreCorrupt, StoreError
from .._grant import Grant, StoreKey
from ._store import KeyLocks

__all__ = ["KeyringTokenStore"]

SERVICE = "agent-sdk"
INDEX = "mcp-oauth:index"
_T = TypeVar("_T")

NO_BACKEND = (
    "no OS keyring backend is available on this machine (typical on a headless server); install and "
    "select one, e.g. `pip install keyrings.alt` and PYTHON_KEYRING_BACKEND=keyrings.alt.file.PlaintextKeyring, "
    "or share tokens through Redis with AGENT_SDK_SECRETS_URL=redis://HOST:6379/0"
)


def entry_name(key: StoreKey) -> str:
    """The keyring user name of a grant."""
    return f"mcp-oauth:{key.holder}:{key.resource}"


class KeyringTokenStore:
    """Grants in the OS keyring via `keyring`; raises `KeyringUnavailable` when there is no backend."""

    def __init__(
        self, *, service: str = SERVICE, lock_dir: Path | str | None = None, lock_timeout: float = 60.0
    ) -> None:
        self._service = service
        self._lock_dir = Path(lock_dir) if lock_dir else _default_lock_dir()
        self._lock_timeout = lock_timeout
        self._locks = KeyLocks()

    @property
    def name(self) -> str:
        return f"OS keyring (service {self._service!r})"

    def __repr__(self) -> str:
        return f"KeyringTokenStore(service={self._service!r})"

    async def __aenter__(self) -> KeyringTokenStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        return None

    async def load(self, key: StoreKey) -> Grant | None:
        raw = await self._call(lambda backend: backend.get_password(self._service, entry_name(key)))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            raise StoreCorrupt(
                f"the keyring entry {entry_name(key)!r} of {self.name} is not valid JSON; "
                "run `agent-sdk mcp oauth NAME --store` again"
            ) from None
        return Grant.from_json(data, f"{self.name} entry {entry_name(key)!r}")

    async def save(self, grant: Grant) -> None:
        value = json.dumps(grant.to_json())

        def write(backend: keyring.backend.KeyringBackend) -> None:
            # One writer at a time: the index is a read-modify-write, and file backends rewrite one file.
            with self._file_lock("index"):
                backend.set_password(self._service, entry_name(grant.key), value)
                index = self._read_index(backend)
                if grant.key.parts() not in index:
                    index.append(grant.key.parts())
                    backend.set_password(self._service, INDEX, json.dumps(sorted(index)))

        await self._call(write)

    async def delete(self, key: StoreKey) -> bool:
        def remove(backend: keyring.backend.KeyringBackend) -> bool:
            with self._file_lock("index"):
                existed = backend.get_password(self._service, entry_name(key)) is not None
                if existed:
                    backend.delete_password(self._service, entry_name(key))
                index = [item for item in self._read_index(backend) if item != key.parts()]
                backend.set_password(self._service, INDEX, json.dumps(index))
            return existed

        return await self._call(remove)

    async def keys(self) -> list[StoreKey]:
        index = await self._call(self._read_index)
        return sorted(StoreKey(*item) for item in index)

    @asynccontextmanager
    async def lock(self, key: StoreKey) -> AsyncGenerator[None]:
        digest = hashlib.sha256(f"{self._service}\0{key.holder}\0{key.resource}".encode()).hexdigest()[:16]
        async with self._locks.hold(key):
            lock = await anyio.to_thread.run_sync(self._file_lock, digest)
            try:
                await anyio.to_thread.run_sync(lock.acquire)
            except filelock.Timeout:
                raise StoreError(f"timed out waiting for the refresh lock of {key} in {self._lock_dir}") from None
            try:
                yield
            finally:
                await anyio.to_thread.run_sync(lock.release)

    def _file_lock(self, name: str) -> filelock.FileLock:
        """A lock file in the private lock folder (made 0700 and checked to be ours first)."""
        folder = self._lock_dir
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = folder.lstat()
        except OSError as exc:
            raise StoreError(f"cannot use the keyring lock folder {folder}: {exc.strerror or exc}") from None
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise StoreError(
                f"the keyring lock folder {folder} is not a private folder of this user (it must be a 0700 "
                "directory you own); remove it or pass another lock_dir"
            )
        return filelock.FileLock(
            folder / f"{name}.lock", timeout=self._lock_timeout, mode=0o600, thread_local=False, is_singleton=False
        )

    def _read_index(self, backend: keyring.backend.KeyringBackend) -> list[list[str]]:
        raw = backend.get_password(self._service, INDEX)
        if raw is None:
            return []
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, list) or not all(
            isinstance(i, list) and len(i) in (2, 3) and all(isinstance(p, str) for p in i) for i in data
        ):
            raise StoreCorrupt(f"the index entry {INDEX!r} of {self.name} is not valid; delete it")
        return data

    async def _call(self, fn: Callable[[keyring.backend.KeyringBackend], _T]) -> _T:
        def run() -> _T:
            backend = keyring.get_keyring()
            if _is_fail_backend(backend):
                raise KeyringUnavailable(NO_BACKEND)
            return fn(backend)

        try:
            return await anyio.to_thread.run_sync(run)
        except keyring.errors.NoKeyringError:
            raise KeyringUnavailable(NO_BACKEND) from None
        except filelock.Timeout:
            raise StoreError(f"timed out waiting for the index lock of the {self.name} in {self._lock_dir}") from None
        except keyring.errors.KeyringError as exc:
            raise StoreError(f"the {self.name} refused the operation ({type(exc).__name__})") from None


def _default_lock_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "agent-sdk-keyring-locks"
    return Path(tempfile.gettempdir()) / f"agent-sdk-keyring-locks-{os.getuid()}"


def _is_fail_backend(backend: keyring.backend.KeyringBackend) -> bool:
    module = type(backend).__module__
    if module == "keyring.backends.fail":
        return True
    if module == "keyring.backends.chainer":
        return not getattr(backend, "backends", [])
    return False
