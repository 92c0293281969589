"""Errors of the gateway package.

GatewayError
└── CliError      a command failed; the message is the sentence the user sees
"""

from __future__ import annotations

__all__ = ["CliError", "GatewayError"]


class GatewayError(Exception):
    """Root of the gateway package's errors."""


class CliError(GatewayError):
    """A command failed for a reason the user can fix; `str(exc)` is the whole message."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
