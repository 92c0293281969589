"""Errors of the gateway package.

GatewayError
├── CliError          a command failed; the message is the sentence the user sees
└── ApiError          an HTTP API refusal; `status` and `code` are what the wire carries
    ├── InvalidRequest            400 invalid_request
    ├── InvalidToolInput          400 invalid_tool_input
    ├── InvalidContinuationToken  400 invalid_continuation_token
    ├── Forbidden                 403 forbidden (authenticated, but not the session's owner)
    ├── UnknownTool               404 unknown_tool (carries the available names)
    ├── ConnectionNotListed       503 connection_unavailable: the tool may be on a connection that could not be listed
    │   ├── AuthorizationServerDown   503 authorization_server_unreachable (its OAuth server does not answer)
    │   ├── ConnectionNeedsLogin      401 connection_unauthorized (no tokens the upstream accepts: log in)
    │   ├── ConnectionTimedOut        504 upstream_timeout
    │   └── ConnectionFailed          502 upstream_error (any other cause: an error answer, a collision, ...)
    ├── SessionNotFound           404 session_not_found
    ├── StaleContinuationToken    409 stale_continuation_token
    ├── SessionBusy               409 session_busy
    ├── CallRefused               a tool call refused before it ran (docs/audit.md); `rpc_code` on MCP
    │   ├── RateLimited               429 rate_limited (`retry_after`: the Retry-After header)
    │   ├── LimitsUnavailable         503 limits_unavailable (the shared limit store cannot be reached)
    │   ├── ApprovalDenied            403 approval_denied (an operator denied it, or nobody answered in time)
    │   └── AuditUnavailable          503 audit_unavailable (`--audit-required` and the audit queue is full)
    └── StateUnavailable          503 state_unavailable (the shared state store cannot be reached)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ApiError",
    "AuthorizationServerDown",
    "CallRefused",
    "CliError",
    "ConnectionFailed",
    "ConnectionNeedsLogin",
    "ConnectionNotListed",
    "ConnectionTimedOut",
    "Forbidden",
    "GatewayError",
    "InvalidContinuationToken",
    "InvalidRequest",
    "InvalidToolInput",
    "SessionBusy",
    "SessionNotFound",
    "StaleContinuationToken",
    "StateUnavailable",
    "ToolHeldBack",
    "UnknownTool",
]


class GatewayError(Exception):
    """Root of the gateway package's errors."""


class CliError(GatewayError):
    """A command failed for a reason the user can fix; `str(exc)` is the whole message."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ApiError(GatewayError):
    """A refusal of the JSON API: `{"ok": false, "error": code, "message": str(exc), **extra}` with `status`."""

    status: ClassVar[int] = 400
    code: ClassVar[str] = "bad_request"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def to_json(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": self.message, **self.extra}

    def headers(self) -> dict[str, str] | None:
        """Headers the HTTP answer carries besides the body (none but for a few refusals)."""
        return None


class InvalidRequest(ApiError):
    status = 400
    code = "invalid_request"


class InvalidToolInput(ApiError):
    status = 400
    code = "invalid_tool_input"


class InvalidContinuationToken(ApiError):
    status = 400
    code = "invalid_continuation_token"


class Forbidden(ApiError):
    status = 403
    code = "forbidden"


class UnknownTool(ApiError):
    status = 404
    code = "unknown_tool"


class ToolHeldBack(ApiError):
    """The upstream changed the tool since `mcp.lock` pinned it (docs/connections.md, "The lock file")."""

    status = 409
    code = "tool_held_back"


class ConnectionNotListed(ApiError):
    """No listed connection offers the tool and a connection that may offer it could not be listed.

    Fail closed: not a 404, since the tool may well exist there. The status and code are that
    connection's cause; the body names it (`connection`) and lists every failure (`connectionErrors`).
    """

    status = 503
    code = "connection_unavailable"


class AuthorizationServerDown(ConnectionNotListed):
    code = "authorization_server_unreachable"


class ConnectionNeedsLogin(ConnectionNotListed):
    status = 401
    code = "connection_unauthorized"


class ConnectionTimedOut(ConnectionNotListed):
    status = 504
    code = "upstream_timeout"


class ConnectionFailed(ConnectionNotListed):
    status = 502
    code = "upstream_error"


class SessionNotFound(ApiError):
    status = 404
    code = "session_not_found"


class StaleContinuationToken(ApiError):
    status = 409
    code = "stale_continuation_token"


class SessionBusy(ApiError):
    status = 409
    code = "session_busy"


class StateUnavailable(ApiError):
    status = 503
    code = "state_unavailable"


class CallRefused(ApiError):
    """A tool call refused before it ran: its limits, its approval, or the audit trail said no
    (`gateway/limits`, `gateway/approvals`, `gateway/audit`). On MCP it is a JSON-RPC error with `rpc_code`."""

    status = 403
    code = "call_refused"
    rpc_code: ClassVar[int] = -32003
    retry_after: int | None = None
