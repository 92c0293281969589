"""A session as the routes see it (`LiveSession`) and the continuation token's form."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from connections import SessionInfo

from ..errors import InvalidContinuationToken
from ._records import SessionRecord

__all__ = ["LiveSession", "parse_continuation_token"]

_TOKEN = re.compile(r"([a-z][a-z0-9_-]{0,31}):([A-Za-z0-9_\-.~/#@+=]{1,256})")


def parse_continuation_token(token: object) -> tuple[str, str]:
    """`<channelId>:<key>` -> (channel id, key). Raises `InvalidContinuationToken` when malformed."""
    if not isinstance(token, str) or (match := _TOKEN.fullmatch(token)) is None:
        raise InvalidContinuationToken("continuationToken must look like <channelId>:<key>, as /v1/sessions lists it")
    return match.group(1), match.group(2)


@dataclass(slots=True)
class LiveSession:
    """A session as last read from the store."""

    record: SessionRecord

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def busy(self) -> bool:
        return self.record.turn is not None

    def info(self) -> SessionInfo:
        return self.record.info()

    def snapshot(self) -> dict[str, Any]:
        """What `check` and the session routes report."""
        r = self.record
        out: dict[str, Any] = {
            "sessionId": r.id,
            "continuationToken": r.continuation_token,
            "title": r.title,
            "createdAt": r.created_at,
            "eventCount": r.event_count,
        }
        if r.turn is not None:
            out.update(status="running", turnId=r.turn)
        elif r.last_turn is not None:
            out.update(r.last_turn)
        else:
            out["status"] = "idle"
        return out
