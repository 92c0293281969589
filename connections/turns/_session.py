"""`SessionInfo`: the durable facts about a session that a turn is built for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["SessionInfo"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What an `auth(session)` callback receives. Derive identity from these, never from a
    continuation token (it rotates on every accepted follow-up)."""

    id: str
    channel_id: str = "http"
    mode: Literal["chat", "task"] = "chat"
    purpose: Literal["live", "eval"] = "live"
    auth: Any = None
    """The authenticated principal's id from the gateway's auth chain (e.g. `"loopback"`, `"bearer:…"`,
    `"oauth:…"`): what owns the session."""
    principal: Any = field(default=None, compare=False, repr=False)
    """The gateway's `Principal` for the request at hand (`id`, `kind`, `role`; for an OAuth principal
    `oauth`: the token's issuer, subject, scopes, client id and claims). For a turn, the principal of the
    request that started it, held in memory only, never stored (docs/connections.md, "Per-session auth").
    None where no principal came with the request."""
    title: str | None = None
