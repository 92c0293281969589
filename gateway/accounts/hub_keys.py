"""`HubKeyStore`: the API keys accounts use to reach a hub (`agent-sdk hub keys ...`, docs/accounts.md).

`<state root>/hub-keys.json`, mode 0600 in a 0700 folder, rewritten atomically (temporary file,
`fsync`, `rename`) under `hub-keys.json.lock`. Each record holds an id, the account, the
connectors the key may use (or all linkable ones), when it was created and revoked, and the
SHA-256 of the key: the key itself is shown once, by `create`, and never stored. A serving hub
re-reads the file when it changes, so `hub keys revoke` takes effect on the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import filelock

from connections.serving import is_valid_tool_name
from oauth._shared import Secret, write_private

from ..errors import GatewayError

__all__ = [
    "KEY_PREFIX",
    "HubKey",
    "HubKeyError",
    "HubKeyStore",
    "HubKeys",
    "from_record",
    "match",
    "new_key",
    "revoked",
    "to_record",
]

KEY_PREFIX = "ask_"
"""Every hub API key starts with this, so a leaked one is recognisable (secret scanners, logs)."""

_T = TypeVar("_T")


class HubKeyError(GatewayError):
    """A key operation failed; the message is one sentence with the fix, never a key."""


@dataclass(frozen=True, slots=True)
class HubKey:
    """One key's record. `connectors` None means every linkable connector of the hub."""

    id: str
    account: str
    connectors: tuple[str, ...] | None
    created: str
    revoked: str | None
    digest: str

    @property
    def active(self) -> bool:
        return self.revoked is None

    def allows(self, connector: str) -> bool:
        return self.connectors is None or connector in self.connectors

    def to_json(self) -> dict[str, Any]:
        """The record as `hub keys list --json` shows it (no digest: it is not needed to manage keys)."""
        return {
            "id": self.id,
            "account": self.account,
            "connectors": "*" if self.connectors is None else list(self.connectors),
            "created": self.created,
            "revoked": self.revoked,
        }


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_key(account: str, connectors: tuple[str, ...] | None) -> tuple[HubKey, Secret]:
    """A new key's record and the key itself. Raises `HubKeyError` for a bad account or connector name."""
    if not is_valid_tool_name(account):
        raise HubKeyError(f"account name {account[:80]!r} must be 1 to 64 letters, digits, '_' or '-'")
    for name in connectors or ():
        if not is_valid_tool_name(name):
            raise HubKeyError(f"connector name {name[:80]!r} is not a connection name")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    record = HubKey(
        id="hk_" + secrets.token_hex(6),
        account=account,
        connectors=tuple(dict.fromkeys(connectors)) if connectors is not None else None,
        created=_now(),
        revoked=None,
        digest=_digest(key),
    )
    return record, Secret(key)


def revoked(k: HubKey) -> HubKey:
    """`k` revoked now (unchanged if it already was)."""
    return k if k.revoked else HubKey(k.id, k.account, k.connectors, k.created, _now(), k.digest)


def match(records: Iterable[HubKey], presented: str) -> HubKey | None:
    """The active record whose digest matches `presented`. Every record is compared in constant time,
    without an early exit, so timing says nothing about which key (or whether a revoked one) matched."""
    digest = _digest(presented).encode()
    matched: HubKey | None = None
    for record in records:
        if hmac.compare_digest(digest, record.digest.encode()) and record.active:
            matched = record
    return matched


def to_record(k: HubKey) -> dict[str, Any]:
    """The stored form of a record (with the key's digest)."""
    return {**k.to_json(), "sha256": k.digest}


def from_record(item: Any, where: str) -> HubKey:
    """A record from its stored form. Raises `HubKeyError` naming `where` for a malformed one."""
    try:
        connectors = item["connectors"]
        return HubKey(
            id=str(item["id"]),
            account=str(item["account"]),
            connectors=None if connectors == "*" else tuple(str(c) for c in connectors),
            created=str(item["created"]),
            revoked=None if item.get("revoked") is None else str(item["revoked"]),
            digest=str(item["sha256"]),
        )
    except (KeyError, TypeError, AttributeError):
        raise HubKeyError(f"{where} holds a malformed key record; move it aside") from None


class HubKeys(Protocol):
    """What the hub's routes need of a key store: `HubKeyStore` (a file) or `RedisHubKeyStore` (replicas)."""

    def authenticate(self, presented: str) -> HubKey | None: ...


class HubKeyStore:
    """The hub's key file. Blocking file I/O: call it from a worker thread in async code."""

    def __init__(self, state_root: Path | str) -> None:
        self._root = Path(state_root)
        self.path = self._root / "hub-keys.json"
        self._seen: tuple[int, int, int] | None = None
        self._cached: list[HubKey] = []
        self._guard = threading.Lock()

    def __repr__(self) -> str:
        return f"HubKeyStore({str(self.path)!r})"

    # -- management (the CLI) -------------------------------------------------------------------

    def create(self, account: str, connectors: tuple[str, ...] | None) -> tuple[HubKey, Secret]:
        """A new key for `account`; returns its record and the key (shown once, never stored).

        Raises `HubKeyError` for a bad account or connector name, or an unwritable state root.
        """
        record, key = new_key(account, connectors)
        self._modify(lambda keys: [*keys, record])
        return record, key

    def list(self) -> list[HubKey]:
        """Every record, revoked ones included, oldest first. Raises `HubKeyError` for a damaged file."""
        return self._run(self._read)

    def revoke(self, key_id: str) -> HubKey:
        """Mark `key_id` revoked (idempotent); returns the record. Raises `HubKeyError` for an unknown id."""
        found: list[HubKey] = []

        def change(keys: list[HubKey]) -> list[HubKey]:
            out: list[HubKey] = []
            for k in keys:
                if k.id == key_id:
                    k = revoked(k)
                    found.append(k)
                out.append(k)
            return out

        self._modify(change)
        if not found:
            raise HubKeyError(f"no key with id {key_id[:40]!r}; see agent-sdk hub keys list")
        return found[0]

    # -- serving ----------------------------------------------------------------------------------

    def authenticate(self, presented: str) -> HubKey | None:
        """The active record whose digest matches `presented`, else None.

        Every record is compared in constant time, without an early exit, so timing says nothing
        about which key (or whether a revoked one) matched. Raises `HubKeyError` for a damaged file.
        """
        return match(self._current(), presented)

    def _current(self) -> list[HubKey]:
        """The records, re-read only when the file changed (the CLI rewrites it by rename)."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return []
        with self._guard:
            if stamp != self._seen:
                self._cached = self._read()
                self._seen = stamp
            return self._cached

    # -- file ---------------------------------------------------------------------------------------

    def _run(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except filelock.Timeout:
            raise HubKeyError(f"timed out waiting for the lock on {self.path}") from None
        except OSError as exc:
            raise HubKeyError(f"cannot use {self.path}: {exc.strerror or type(exc).__name__}") from None

    def _read(self) -> list[HubKey]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except ValueError:
            raise HubKeyError(f"{self.path} is not valid JSON; restore it from a backup or move it aside") from None
        raw = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            raise HubKeyError(f"{self.path} is not an agent-sdk hub key file; move it aside")
        return [from_record(item, str(self.path)) for item in raw]

    def _modify(self, change: Callable[[list[HubKey]], list[HubKey]]) -> None:
        def run() -> None:
            self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
            with filelock.FileLock(
                str(self.path) + ".lock", timeout=30, mode=0o600, thread_local=False, is_singleton=False
            ):
                self._write(change(self._read()))

        self._run(run)

    def _write(self, keys: list[HubKey]) -> None:
        records = [to_record(k) for k in keys]
        payload = json.dumps({"version": 1, "keys": records}, indent=2).encode()
        write_private(self.path, payload)  # atomic: a serving hub reads the old file or the new one
