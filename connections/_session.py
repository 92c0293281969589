"""`SessionInfo`: the durable facts about a session that a turn is built for."""

from __future__ import annotations

from dataclasses import dataclass
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
    """The authenticated principal from the gateway's auth chain (e.g. `"loopback"`, `"bearer"`)."""
    title: str | None = None
