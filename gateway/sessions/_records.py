"""What a session is made of: its record, and the events of its log (`{type, index, sessionId, turnId?, at, data}`)."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from connections import SessionInfo

__all__ = [
    "SESSION_ID",
    "SessionRecord",
    "closing_events",
    "created_ms",
    "decode_cursor",
    "encode_cursor",
    "interrupted_outcome",
    "new_event",
    "now",
    "unreadable_event",
    "with_index",
]

SESSION_ID = re.compile(r"ses_[0-9a-f]{24}")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class SessionRecord:
    id: str
    owner: str
    continuation_token: str
    created_at: str
    title: str | None = None
    channel_id: str = "http"
    mode: Literal["chat", "task"] = "chat"
    purpose: Literal["live", "eval"] = "live"
    turn: str | None = None
    """The running turn's id, None when idle."""
    last_turn: dict[str, Any] | None = None
    """The last finished turn: `{turnId, status, reply?, error?, message?, problems?}`."""
    event_count: int = field(default=0)

    def info(self) -> SessionInfo:
        """The identity a turn's toolset is built for (durable facts, never the rotating token)."""
        return SessionInfo(
            id=self.id,
            channel_id=self.channel_id,
            mode=self.mode,
            purpose=self.purpose,
            auth=self.owner,
            title=self.title,
        )

    def identity(self) -> dict[str, Any]:
        """The fields that never change after creation."""
        return {
            "id": self.id,
            "owner": self.owner,
            "created_at": self.created_at,
            "title": self.title,
            "channel_id": self.channel_id,
            "mode": self.mode,
            "purpose": self.purpose,
        }


def created_ms(record: SessionRecord) -> int:
    """The creation time in milliseconds: the listing index's sort key."""
    try:
        return int(datetime.fromisoformat(record.created_at.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def encode_cursor(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps([key[0], key[1]]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str] | None:
    """The (created ms, session id) a cursor names; None when it is not one of ours."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        return None
    if (
        isinstance(raw, list)
        and len(raw) == 2
        and isinstance(raw[0], int)
        and isinstance(raw[1], str)
        and SESSION_ID.fullmatch(raw[1])
    ):
        return raw[0], raw[1]
    return None


def new_event(session_id: str, kind: str, data: dict[str, Any], turn_id: str | None = None) -> dict[str, Any]:
    """An event without its index (the store assigns it when appending)."""
    event: dict[str, Any] = {"type": kind, "sessionId": session_id}
    if turn_id is not None:
        event["turnId"] = turn_id
    event.update(at=now(), data=data)
    return event


def interrupted_outcome(reason: str) -> dict[str, Any]:
    """How a turn whose process went away ends: `server_restarted` (one process), `server_stopping` (its
    process shut down while it ran) or `owner_lost` (its replica's lease lapsed)."""
    message = {
        "server_restarted": "the server stopped during this turn",
        "server_stopping": "the server running this turn shut down",
        "owner_lost": "the replica running this turn went away (its lease lapsed)",
    }[reason]
    return {"status": "interrupted", "error": reason, "message": message}


def closing_events(session_id: str, turn_id: str, outcome: dict[str, Any]) -> list[dict[str, Any]]:
    """`turn.completed` or `turn.failed`, then `session.waiting`: how every turn ends on the stream. They are
    written in one store operation with the lease's release, so a turn is closed once, by its owner or a reaper."""
    kind = "turn.completed" if outcome["status"] == "completed" else "turn.failed"
    return [new_event(session_id, kind, outcome, turn_id), new_event(session_id, "session.waiting", {}, turn_id)]


def unreadable_event(session_id: str, index: int) -> dict[str, Any]:
    """What readers get in place of a stored event the store cannot read: its index and a sentence (no `at`: it
    is not known)."""
    return {
        "type": "event.unreadable",
        "index": index,
        "sessionId": session_id,
        "data": {"message": "this event could not be read from the state store; it is left out"},
    }


def with_index(event: dict[str, Any], index: int) -> dict[str, Any]:
    """`event` with its `index` right after `type`, as every reader sees it."""
    out: dict[str, Any] = {"type": event["type"], "index": index}
    out.update((k, v) for k, v in event.items() if k != "type")
    return out
