"""What an approval is about, how it was decided, and the refusals of a bad decision (docs/audit.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import ApiError, CallRefused

__all__ = [
    "ApprovalDecided",
    "ApprovalDenied",
    "ApprovalNotFound",
    "Decision",
    "PendingApproval",
    "State",
    "decided_sentence",
]

State = Literal["pending", "approved", "denied", "timeout", "gone"]


class ApprovalDenied(CallRefused):
    """An operator denied the held call, or nobody answered before its deadline (fail closed)."""

    status = 403
    code = "approval_denied"
    rpc_code = -32003


class ApprovalNotFound(ApiError):
    status = 404
    code = "approval_not_found"


class ApprovalDecided(ApiError):
    status = 409
    code = "approval_already_decided"


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A call held for an operator: who asked, for what, and until when (epoch seconds)."""

    id: str
    principal: str
    surface: str
    target: str
    connection: str | None
    requested_at: float
    expires_at: float
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        def iso(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")

        return {
            "id": self.id,
            "principal": self.principal,
            "surface": self.surface,
            "tool": self.target,
            "connection": self.connection,
            "requestId": self.request_id,
            "requestedAt": iso(self.requested_at),
            "expiresAt": iso(self.expires_at),
        }

    def dumps(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> PendingApproval:
        return cls(**json.loads(text))


@dataclass(frozen=True, slots=True)
class Decision:
    """How a held call ended: `approved` by `by`, `denied` by `by`, or `timeout` (no answer: a denial)."""

    state: State
    by: str | None = None

    @property
    def approved(self) -> bool:
        return self.state == "approved"


def decided_sentence(approval_id: str, state: str, by: str | None) -> str:
    """Why a second decision on `approval_id` is refused, in the words of how the first one went."""
    how = {
        "approved": f"it was approved by {by}",
        "denied": f"it was denied by {by}",
        "timeout": "nobody answered before its deadline, so the call was denied",
        "gone": "its caller went away before an answer came",
    }.get(state, state)
    return f"approval {approval_id} is already decided: {how}; the call is no longer waiting"
