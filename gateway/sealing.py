"""`Sealer`: what a peer carries back to the gateway (a `requestState`, a task id), sealed with the deployment key.

The stateless endpoints hold no per-peer state (DESIGN.md §9), so whatever a later request must route
by travels with the peer, sealed: authenticated encryption (AES-256-GCM, `cryptography`), so a peer
can neither read nor forge nor alter it. Each use has its own associated data and prefix
(`purpose`), so a token sealed for one use never opens as another. Every replica opens what any other
sealed, because they share the key (`request_state.load_state_key`: in Redis with `--state-url`, else
`<state root>/request-state.key`); `RequestStates.sealer_for` hands out a `Sealer` on that key.

A token from another deployment, a changed key, a tampered or truncated token: `SealError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["SealError", "Sealer"]

_NONCE = 12


class SealError(ValueError):
    """A token this deployment did not seal for this purpose (or one altered since)."""


class Sealer:
    """Seals JSON objects into opaque URL-safe tokens `prefix` + base64(nonce + AES-GCM(payload, aad))."""

    def __init__(self, key: bytes, *, aad: bytes, prefix: str, max_length: int = 64 * 1024) -> None:
        if len(key) != 32:
            raise ValueError("a sealing key is 32 bytes")
        self._aead = AESGCM(key)
        self._aad = aad
        self._prefix = prefix
        self._max = max_length

    def __repr__(self) -> str:
        return f"Sealer(prefix={self._prefix!r}, key=***)"

    def seal(self, payload: Mapping[str, Any]) -> str:
        """`payload` (JSON) as an opaque, authenticated token."""
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, json.dumps(dict(payload), separators=(",", ":")).encode(), self._aad)
        return self._prefix + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(self, token: object) -> dict[str, Any]:
        """The JSON object sealed in `token`. Raises `SealError`."""
        if not isinstance(token, str) or not token.startswith(self._prefix) or len(token) > self._max:
            raise SealError("not sealed by this gateway")
        body = token[len(self._prefix) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            payload = json.loads(self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], self._aad))
        except (binascii.Error, ValueError, InvalidTag):
            raise SealError("not sealed by this gateway, or altered") from None
        if not isinstance(payload, dict):
            raise SealError("not sealed by this gateway")
        return payload  # pyright: ignore[reportUnknownVariableType]
