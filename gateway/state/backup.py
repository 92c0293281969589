"""A copy of the gateway's keys in Redis (`--state-url`), and their restore (docs/deploy.md, "Backup and restore").

Every key the gateway writes starts with `agent-sdk:` (sessions and their event streams, continuation token
digests, OAuth grants, hub keys, approvals, the audit stream, pending console logins, used `requestState` ids,
DPoP proof ids, rate-limit counters). `dump_state` copies each with Redis's own `DUMP` (any type, exactly) and
its expiry as an absolute time; `restore_state` puts them back with `RESTORE ... ABSTTL`, so a key that would
have expired meanwhile stays gone. Other programs' keys in the same database are neither read nor written.

The file is JSON lines, mode 0600 (it holds OAuth refresh tokens): a header line, then one line a key. `DUMP`'s
payload is Redis's own serialization: restore into the same Redis version or a newer one.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from oauth._shared import write_private

from ..errors import StateUnavailable
from ._redis import safe_url

__all__ = ["BACKUP_FORMAT", "KEY_PATTERN", "BackupInvalid", "dump_state", "restore_state"]

KEY_PATTERN = "agent-sdk:*"
BACKUP_FORMAT = "agent-sdk-state-backup/1"
_BATCH = 500
"""Keys read (or restored) per round trip."""


class BackupInvalid(ValueError):
    """The backup file cannot be restored, or the target is not empty; the message says why and what to do."""


def _client(url: str) -> Any:
    try:
        import redis
    except ImportError:  # pragma: no cover - the [redis] extra is missing
        raise StateUnavailable("the state backup needs the redis package: pip install 'agent-sdk[redis]'") from None
    return redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=30.0)


def _unreachable(url: str, exc: Exception) -> StateUnavailable:
    return StateUnavailable(
        f"the state store at {safe_url(url)} cannot be used ({type(exc).__name__}); check AGENT_SDK_STATE_URL "
        "(host, port, database, password) and that Redis runs"
    )


def dump_state(url: str, out: Path) -> int:
    """Write every `agent-sdk:` key of Redis at `url` to `out` (atomically, mode 0600); how many keys.

    Raises `StateUnavailable` (a sentence, no password) when Redis cannot be used."""
    from redis.exceptions import RedisError

    client = _client(url)
    lines: list[str] = []
    try:
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        keys: list[bytes] = list(dict.fromkeys(client.scan_iter(match=KEY_PATTERN, count=1000)))  # SCAN may repeat
        for start in range(0, len(keys), _BATCH):
            batch = keys[start : start + _BATCH]
            with client.pipeline(transaction=False) as pipe:
                for key in batch:
                    pipe.dump(key).pttl(key)
                answers = pipe.execute()
            for key, payload, pttl in zip(batch, answers[::2], answers[1::2], strict=True):
                if payload is None:  # expired or deleted since the scan
                    continue
                record = {
                    "key": key.decode("utf-8", "backslashreplace"),
                    "k": base64.b64encode(key).decode(),
                    "expiresAtMs": now_ms + pttl if pttl > 0 else 0,
                    "dump": base64.b64encode(payload).decode(),
                }
                lines.append(json.dumps(record, separators=(",", ":")))
        version = str(client.info("server").get("redis_version", "?"))
    except (RedisError, OSError) as exc:
        raise _unreachable(url, exc) from None
    finally:
        client.close()
    header = {"format": BACKUP_FORMAT, "keys": len(lines), "redisVersion": version, "takenAtMs": now_ms}
    write_private(out, "\n".join([json.dumps(header), *lines, ""]).encode())
    return len(lines)


def _records(path: Path) -> list[tuple[bytes, int, bytes]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BackupInvalid(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    rows = text.splitlines()
    try:
        header = json.loads(rows[0]) if rows else {}
        if not isinstance(header, dict) or header.get("format") != BACKUP_FORMAT:
            raise ValueError
        records = [json.loads(row) for row in rows[1:] if row.strip()]
        out = [(base64.b64decode(r["k"]), int(r["expiresAtMs"]), base64.b64decode(r["dump"])) for r in records]
    except (ValueError, KeyError, TypeError):
        raise BackupInvalid(
            f"{path} is not a backup made by `agent-sdk state-backup` (or it was cut short); "
            "restore from a complete one"
        ) from None
    if len(out) != header.get("keys"):
        raise BackupInvalid(
            f"{path} holds {len(out)} keys where its header says {header.get('keys')}; it was cut short"
        )
    return out


def restore_state(url: str, backup: Path, *, replace: bool = False) -> int:
    """Put the keys of `backup` back into Redis at `url`; how many were restored (a key whose expiry passed
    since is not). Without `replace`, refuses (`BackupInvalid`) when `agent-sdk:` keys are there already.

    Raises `BackupInvalid` for a file that is not a whole backup, `StateUnavailable` when Redis cannot be used."""
    from redis.exceptions import RedisError, ResponseError

    records = _records(backup)
    client = _client(url)
    try:
        if not replace and next(iter(client.scan_iter(match=KEY_PATTERN, count=1000)), None) is not None:
            raise BackupInvalid(
                f"the state store at {safe_url(url)} already holds agent-sdk keys; restore into an empty one "
                "(stop every replica first), or pass --replace to overwrite the keys the backup holds"
            )
        seconds, micros = client.time()
        now_ms = seconds * 1000 + micros // 1000
        due = [(key, at, payload) for key, at, payload in records if not at or at > now_ms]  # not expired since
        for start in range(0, len(due), _BATCH):
            with client.pipeline(transaction=False) as pipe:
                for key, expires_at, payload in due[start : start + _BATCH]:
                    pipe.restore(key, expires_at, payload, replace=replace, absttl=bool(expires_at))
                pipe.execute()
    except ResponseError as exc:
        raise BackupInvalid(
            f"Redis at {safe_url(url)} refused a key of {backup} ({str(exc)[:120]}); a backup restores into the "
            "Redis version it was taken from or a newer one"
        ) from None
    except (RedisError, OSError) as exc:
        raise _unreachable(url, exc) from None
    finally:
        client.close()
    return len(due)
