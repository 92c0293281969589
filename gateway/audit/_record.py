"""`AuditRecord`: one line of the audit trail, for one decision or one call (docs/audit.md, "The format")."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import pydantic_core

__all__ = ["OUTCOMES", "AuditRecord", "Outcome", "argument_digest"]

Outcome = Literal["ok", "tool_error", "refused", "failed", "abandoned"]
OUTCOMES: tuple[Outcome, ...] = ("ok", "tool_error", "refused", "failed", "abandoned")


def argument_digest(arguments: object, key: bytes) -> str:
    """HMAC-SHA256 under `key` (derived from the deployment's state key) of the arguments as canonical JSON
    (sorted keys, no spaces): the same call gives the same digest in one deployment, nothing of the values can
    be read back, and a guessed argument cannot be confirmed without the key. Only with `--audit-argument-digest`."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return "hmac-sha256:" + hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


@dataclass(slots=True)
class AuditRecord:
    """What the trail keeps of one call: who, where, what, how it was decided and how it ended.

    Never the result, and the arguments only as the operator was shown them to judge a held call
    (`approval`: secret-looking values masked). `policies` holds the ids of the policies that made the
    decision (empty until a policy set decides: every call is then allowed by no policy); `approver` the
    operator who approved a held call; `reason` the refusal's or failure's code. `name` and `subject` are the
    person behind an OAuth principal (its display name and `sub`); `request_id` is the gateway's own id of
    the request, `peer_request_id` the `X-Request-Id` the peer sent.
    """

    principal: str
    surface: str
    target: str
    method: str = "tools/call"
    issuer: str | None = None
    connection: str | None = None
    request_id: str | None = None
    decision: Literal["allow", "deny"] = "allow"
    policies: list[str] = field(default_factory=list[str])
    outcome: Outcome = "ok"
    reason: str | None = None
    approver: str | None = None
    arguments_digest: str | None = None
    duration_ms: float = 0.0
    at: float = field(default_factory=time.time)
    name: str | None = None
    subject: str | None = None
    peer_request_id: str | None = None
    approval: dict[str, Any] | None = None
    served_as: str | None = None
    """The name a curated server showed the tool under (`target` is the real tool's; docs/curated-servers.md)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(self.at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "requestId": self.request_id,
            "principal": self.principal,
            "name": self.name or self.principal,
            "subject": self.subject,
            "issuer": self.issuer,
            "surface": self.surface,
            "method": self.method,
            "target": self.target,
            "connection": self.connection,
            "decision": self.decision,
            "policies": self.policies,
            "outcome": self.outcome,
            "durationMs": round(self.duration_ms, 3),
        }
        if self.reason is not None:
            out["reason"] = self.reason
        if self.approver is not None:
            out["approver"] = self.approver
        if self.arguments_digest is not None:
            out["argumentsDigest"] = self.arguments_digest
        if self.peer_request_id is not None:
            out["peerRequestId"] = self.peer_request_id
        if self.approval is not None:
            out["approval"] = self.approval
        if self.served_as is not None:
            out["servedAs"] = self.served_as
        return out

    def line(self) -> str:
        # pydantic_core's encoder: the same compact UTF-8 JSON as `json.dumps(..., separators=(",", ":"),
        # ensure_ascii=False)`, in half the time (every call writes one).
        return pydantic_core.to_json(self.to_json()).decode()
