"""The access token a caller presented to the gateway, for the length of its request.

A connection that acts with the caller's own credential (`grant="token_exchange"` or `"id_jag"`,
`_exchange.py`) needs that token as RFC 8693's `subject_token`. The gateway's auth chain admits the
token and calls `present(...)`; everything the request runs (its tool calls, listings, a turn it
starts) reads it back with `presented()`, a context variable, so no signature between the auth chain
and the upstream grows. The token itself is a `Secret` and is never sent upstream as it is.
"""

from __future__ import annotations

import contextvars
import hashlib
from dataclasses import dataclass, field

from .._shared import Secret

__all__ = ["PresentedToken", "present", "presented"]


@dataclass(frozen=True, slots=True)
class PresentedToken:
    """Who presented which token: the gateway's principal id, the token's issuer, the token and its expiry."""

    principal: str
    issuer: str
    token: Secret = field(repr=False)
    expires_at: float = field(repr=False)

    def digest(self) -> str:
        """SHA-256 (hex) of the token: what keeps this token's exchanged tokens apart from any other's, even
        another of the same principal (never the token itself)."""
        return hashlib.sha256(self.token.reveal().encode()).hexdigest()


_PRESENTED: contextvars.ContextVar[PresentedToken | None] = contextvars.ContextVar(
    "agent_sdk_presented_token", default=None
)


def present(caller: PresentedToken) -> contextvars.Token[PresentedToken | None]:
    """From now on in this task (and the tasks it starts) `presented()` is `caller`."""
    return _PRESENTED.set(caller)


def presented() -> PresentedToken | None:
    """The token the current request's caller presented, or None (no OAuth caller)."""
    return _PRESENTED.get()
