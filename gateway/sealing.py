"""Sealed tokens: what a peer carries back to the gateway (a task id, an MRTR `requestState`), opened by any replica.

The stateless endpoints hold no per-peer state (DESIGN.md §9), so whatever a later request must route
by travels with the peer, sealed: authenticated encryption (`cryptography`'s Fernet: AES-128-CBC with
an HMAC-SHA256 over it), so a peer can neither read nor forge nor alter one, and a token sealed for one
purpose does not open as another. Every replica of a deployment opens what any other sealed, because
they share the key (`deployment_sealer`):

- `AGENT_SDK_SEALING_KEY`: one Fernet key, or several separated by commas (the first seals, every one
  opens: rotate by putting a new key first, and drop the old one once its tokens have expired);
- else, with `--state-url`, a key kept in that Redis (`agent-sdk:sealing-key`, made once by whichever
  replica starts first);
- else `<state root>/sealing.key`, made once (mode 0600, written whole before it appears).

A token from another deployment, a changed key, a tampered or truncated token: `SealError`, one
sentence, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from ._redis import redis_client
from .errors import CliError
from .settings import ServeSettings

__all__ = ["KEY_ENV", "REDIS_KEY", "SealError", "Sealer", "deployment_sealer", "file_key"]

KEY_ENV = "AGENT_SDK_SEALING_KEY"
REDIS_KEY = "agent-sdk:sealing-key"
KEY_FILE = "sealing.key"


class SealError(ValueError):
    """A token that this deployment did not seal (or not for this purpose): one sentence, safe to show."""


class Sealer:
    """Seals small JSON payloads for one deployment (module docstring)."""

    def __init__(self, *keys: bytes | str) -> None:
        if not keys:
            raise ValueError("a Sealer needs at least one key")
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
        except (ValueError, TypeError):
            raise ValueError(
                "a sealing key must be 32 bytes in URL-safe base64 (make one with: "
                'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())")'
            ) from None

    def seal(self, purpose: str, payload: Mapping[str, Any]) -> str:
        """`payload` (JSON) sealed for `purpose`: an opaque URL-safe ASCII token."""
        body = json.dumps({"for": purpose, "v": dict(payload)}, separators=(",", ":")).encode()
        return self._fernet.encrypt(body).decode("ascii")

    def open(self, purpose: str, token: object, *, what: str = "token") -> dict[str, Any]:
        """The payload sealed in `token` for `purpose`. Raises `SealError` (`what` names it in the sentence)."""
        refused = SealError(f"this {what} was not issued by this gateway (or its sealing key changed)")
        if not isinstance(token, str) or not token or len(token) > 4096:
            raise refused
        try:
            data = json.loads(self._fernet.decrypt(token.encode("ascii")))
        except (InvalidToken, UnicodeEncodeError, ValueError):
            raise refused from None
        if not isinstance(data, dict) or data.get("for") != purpose or not isinstance(data.get("v"), dict):  # pyright: ignore[reportUnknownMemberType]
            raise refused
        return data["v"]  # pyright: ignore[reportUnknownVariableType]

    def __repr__(self) -> str:
        return "Sealer(<keys hidden>)"


def _keys_from(text: str, source: str) -> Sealer:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    try:
        return Sealer(*keys)
    except ValueError as exc:
        raise CliError(f"{source}: {exc}") from None


def file_key(state_root: Path) -> str:
    """The deployment's key in `<state root>/sealing.key`, made (0600, whole, once) when missing."""
    path = state_root / KEY_FILE
    with contextlib.suppress(FileNotFoundError):
        return path.read_text(encoding="ascii").strip()
    state_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=state_root, prefix=".sealing-", suffix=".tmp")  # 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(Fernet.generate_key().decode("ascii") + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: theirs wins
            os.link(tmp, path)
    finally:
        os.unlink(tmp)
    return path.read_text(encoding="ascii").strip()


async def _redis_key(url: str) -> str:
    client = redis_client(url)
    try:
        await client.set(REDIS_KEY, Fernet.generate_key().decode("ascii"), nx=True)  # the first replica's wins
        key = await client.get(REDIS_KEY)
    finally:
        await client.aclose()
    if not isinstance(key, str):
        raise CliError(f"the sealing key at {REDIS_KEY!r} in the state store could not be read")
    return key


async def deployment_sealer(settings: ServeSettings, environ: Mapping[str, str] | None = None) -> Sealer:
    """The deployment's `Sealer` (module docstring for where its key comes from). Raises `CliError`."""
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV, "").strip():
        return _keys_from(env[KEY_ENV], KEY_ENV)
    if settings.state_url is not None:
        return _keys_from(await _redis_key(settings.state_url.get_secret_value()), "the state store's sealing key")
    return _keys_from(file_key(settings.state_root), str(settings.state_root / KEY_FILE))
