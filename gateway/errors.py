"""Errors of the gateway package.

GatewayError
├── CliError          a command failed; the message is the sentence the user sees
└── ApiError          an HTTP API refusal; `status` and `code` are what the wire carries
    ├── InvalidRequest            400 invalid_request
    ├── InvalidToolInput          400 invalid_tool_input
    ├── InvalidContinuationToken  400 invalid_continuation_token
    ├── Forbidden                 403 forbidden (authenticated, but not the session's owner)
    ├── UnknownTool               404 unknown_tool (carries the available names)
    ├── SessionNotFound           404 session_not_found
    ├── StaleContinuationToken    409 stale_continuation_token
    ├── SessionBusy               409 session_busy
    └── StateUnavailable          503 state_unavailable (the shared state store cannot be reached)
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "ApiError",
    "CliError",
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
