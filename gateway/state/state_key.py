"""The deployment's state key: the AES-256-GCM key that seals `requestState`s, peer `Mcp-Session-Id`s, task
ids and pending console logins (`gateway/state/request_state.py`), so that any replica can open what another sealed.

Where it comes from (docs/deploy.md, "The state key"):

- `--state-key-file PATH` (or `AGENT_SDK_STATE_KEY_FILE`): a file of the deployment's, mode 0600 (a file
  others may read is refused), holding the key as `agent-sdk state-key` writes it;
- `AGENT_SDK_STATE_KEY`: the key itself, base64url of 32 random bytes (43 characters), for platforms that
  hand secrets to processes as environment variables;
- neither, without `--state-url`: `<state root>/request-state.key` (0600 in a 0700 folder), made at the
  first start, so a single process needs nothing;
- neither, with `--state-url`: refused. Replicas must agree on the key, and Redis is no place for it (whoever
  reads Redis could forge every sealed value), so the deployment gives the same key to each replica.

A key is never read from Redis nor written there. Every problem is a `StateKeyInvalid` whose message says what
is wrong with the key and how to make one, never what the key holds.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import os
import re
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

import anyio

from ..errors import GatewayError
from ..settings import ServeSettings
from .request_state import canonical_b64decode

__all__ = [
    "STATE_KEY_ENV",
    "StateKeyInvalid",
    "check_state_key",
    "derive_key",
    "forget_redis_key",
    "load_state_key",
    "new_state_key",
    "parse_state_key",
    "write_state_key",
]

logger = logging.getLogger("agent_sdk.state")

STATE_KEY_ENV = "AGENT_SDK_STATE_KEY"
_LEGACY_REDIS_KEY = "agent-sdk:request-state:key"
"""Where versions before the deployment's key kept one in clear, readable by whoever reads Redis."""
_KEY_FILE = "request-state.key"
_HEX = re.compile(r"[0-9a-fA-F]{64}")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]{43}")
_MAKE_ONE = "make one with `agent-sdk state-key --out PATH` (or AGENT_SDK_STATE_KEY=$(agent-sdk state-key))"


class StateKeyInvalid(GatewayError, ValueError):
    """The deployment's state key is missing, cannot be read, or is not a key; the message says which."""


def new_state_key() -> str:
    """A fresh key as text: base64url of 32 random bytes, no padding (43 characters)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def parse_state_key(text: str, where: str) -> bytes:
    """The 32-byte key written in `text` (base64url as `new_state_key` writes it, or 64 hex digits as older
    versions wrote `request-state.key`). Raises `StateKeyInvalid` naming `where`, never echoing `text`."""
    text = text.strip()
    if _HEX.fullmatch(text):
        return bytes.fromhex(text)
    body = text.removesuffix("=")
    if _BASE64URL.fullmatch(body):
        # 43 characters carry 258 bits: the two spare ones must be zero (the canonical form), or two texts are one key.
        with contextlib.suppress(ValueError):
            return canonical_b64decode(body)
    raise StateKeyInvalid(
        f"{where} is not a state key (base64url of 32 random bytes, 43 characters, or 64 hex digits); {_MAKE_ONE}"
    )


def write_state_key(path: Path) -> None:
    """Write a new key to `path`, mode 0600, refusing to replace a file that is there (a deployment's key
    replaced would void every sealed value). Raises `StateKeyInvalid` with a sentence."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise StateKeyInvalid(
            f"{path} already exists; the state key in it stays (remove it first to replace it)"
        ) from None
    except OSError as exc:
        raise StateKeyInvalid(f"cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    with os.fdopen(fd, "w", encoding="ascii") as out:
        os.fchmod(out.fileno(), 0o600)  # whatever the umask
        out.write(new_state_key() + "\n")
        out.flush()
        os.fsync(out.fileno())


def _read_key_file(path: Path, where: str) -> bytes:
    """The key in a deployment's key file, which only its owner may read."""
    try:
        with open(path, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise StateKeyInvalid(f"{where} {path} is not a file; {_MAKE_ONE}")
            if mode & 0o077:
                raise StateKeyInvalid(
                    f"{where} {path} may be read by others (mode {stat.S_IMODE(mode):04o}); "
                    f"make it private with `chmod 600 {path}`"
                )
            data = fh.read(4096)
    except OSError as exc:
        raise StateKeyInvalid(f"cannot read {where} {path}: {exc.strerror or type(exc).__name__}") from None
    return parse_state_key(data.decode("ascii", errors="replace"), f"{where} {path}")


def _root_key(state_root: Path) -> bytes:
    """`<state_root>/request-state.key` (0600 in a 0700 folder), made once: the first writer wins, atomically."""
    try:
        state_root.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = state_root / _KEY_FILE
        if not path.exists():
            fd, temp = tempfile.mkstemp(dir=state_root, prefix=".request-state.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as out:
                    out.write(secrets.token_hex(32))
                    out.flush()
                    os.fsync(out.fileno())
                os.chmod(temp, 0o600)
                try:
                    os.link(temp, path)  # fails if another process made it first: theirs is the key
                except FileExistsError:
                    pass
            finally:
                os.unlink(temp)
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise StateKeyInvalid(f"cannot make or read the request-state key in {state_root}: {reason}") from None
    try:
        return parse_state_key(text, str(path))
    except StateKeyInvalid:
        raise StateKeyInvalid(
            f"{path} does not hold a request-state key (64 hex digits); delete it and start again to make a new "
            "one (elicitation retries and task ids sealed with the old key are then refused)"
        ) from None


def derive_key(key: bytes, label: str) -> bytes:
    """A 32-byte key for one use of the state key (`label`: "dpop-nonce", "audit-argument-digest"): an
    HMAC-SHA256 of the label under it, so what one use reveals says nothing of the key or of another use."""
    return hmac.new(key, f"agent-sdk {label} v1".encode(), hashlib.sha256).digest()


def state_key(settings: ServeSettings) -> bytes:
    """The key `settings` name (module docstring). Raises `StateKeyInvalid` with a sentence."""
    given = settings.state_key.get_secret_value() if settings.state_key is not None else None
    if given is not None and settings.state_key_file is not None:
        raise StateKeyInvalid(f"give the state key once: {STATE_KEY_ENV} or --state-key-file, not both")
    if given is not None:
        return parse_state_key(given, STATE_KEY_ENV)
    if settings.state_key_file is not None:
        return _read_key_file(settings.state_key_file, "the state key file")
    if settings.state_url is not None:
        raise StateKeyInvalid(
            "--state-url needs the deployment's state key, the same on every replica (it seals requestStates, "
            f"Mcp-Session-Ids and task ids, and is never kept in Redis): {_MAKE_ONE}, then give every replica "
            f"--state-key-file PATH or {STATE_KEY_ENV}"
        )
    return _root_key(settings.state_root)


def check_state_key(settings: ServeSettings) -> None:
    """Read (or, for one process, make) the state key now: `StateKeyInvalid` with a sentence before serving."""
    state_key(settings)


async def load_state_key(settings: ServeSettings) -> bytes:
    """`state_key` off the event loop (it may make a file)."""
    return await anyio.to_thread.run_sync(state_key, settings)


async def forget_redis_key(client: Any) -> None:
    """Delete the key an older version kept in Redis (anyone who read it could forge sealed values); a Redis
    that does not answer now is left for the next start."""
    import redis.exceptions

    try:
        removed = await client.delete(_LEGACY_REDIS_KEY)
    except redis.exceptions.RedisError:
        return
    if removed:
        logger.warning(
            "deleted %s, a state key an older version kept in Redis; the deployment's key is used", _LEGACY_REDIS_KEY
        )
