"""What an approval is about, how it was decided, and the refusals of a bad decision (docs/audit.md)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import ApiError, CallRefused

__all__ = [
    "ApprovalAbandoned",
    "ApprovalDecided",
    "ApprovalDenied",
    "ApprovalNotFound",
    "ApprovalSeparation",
    "Decision",
    "PendingApproval",
    "State",
    "decided_sentence",
]

State = Literal["pending", "approved", "denied", "timeout", "gone", "abandoned"]


class ApprovalDenied(CallRefused):
    """An operator denied the held call, or nobody answered before its deadline (fail closed)."""

    status = 403
    code = "approval_denied"
    rpc_code = -32003


class ApprovalAbandoned(CallRefused):
    """The gateway began to stop while the call waited: it was not run, and the peer is told so."""

    status = 503
    code = "gateway_stopping"
    rpc_code = -32004


class ApprovalSeparation(ApiError):
    """An operator tried to decide a call it is holding itself (`--approval-separation`)."""

    status = 403
    code = "approval_separation"


class ApprovalNotFound(ApiError):
    status = 404
    code = "approval_not_found"


class ApprovalDecided(ApiError):
    status = 409
    code = "approval_already_decided"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A call held for an operator: who asked (the principal, its OAuth subject and display name), for what
    (the tool, its connection, the arguments as `connections.serving.shown_arguments` shows them), from which
    peer (`request_ids.peer_facts`), and until when (epoch seconds). `request_id` is the gateway's own id of
    the request, `peer_request_id` the peer's `X-Request-Id`."""

    id: str
    principal: str
    surface: str
    target: str
    connection: str | None
    requested_at: float
    expires_at: float
    request_id: str | None = None
    name: str | None = None
    subject: str | None = None
    arguments: Any = None
    peer: dict[str, str] | None = None
    peer_request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "principal": self.principal,
            "name": self.name or self.principal,
            "subject": self.subject,
            "surface": self.surface,
            "tool": self.target,
            "connection": self.connection,
            "arguments": self.arguments,
            "peer": self.peer or {},
            "requestId": self.request_id,
            "peerRequestId": self.peer_request_id,
            "requestedAt": _iso(self.requested_at),
            "expiresAt": _iso(self.expires_at),
        }

    def audit_json(self) -> dict[str, Any]:
        """What the audit record of the held call keeps of it: what the operator was shown to judge it."""
        return {
            "id": self.id,
            "arguments": self.arguments,
            "peer": self.peer or {},
            "expiresAt": _iso(self.expires_at),
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
        "abandoned": "the gateway stopped while it waited, so the call was not run",
    }.get(state, state)
    return f"approval {approval_id} is already decided: {how}; the call is no longer waiting"
