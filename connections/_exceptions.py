"""Errors of the connections package.

ConnectionsError                 root; `code` is the wire code the gateway maps to HTTP/JSON-RPC
├── ProjectError                 the project cannot be loaded at all (missing folder)
├── ToolInputError               400 invalid_tool_input: a tool's input failed validation
└── EnvironmentVariableMissing   a `${VAR}` in headers/env is not set
"""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ConnectionsError", "EnvironmentVariableMissing", "ProjectError", "ToolInputError"]


class ConnectionsError(Exception):
    """Root of the connections package's errors."""

    code: ClassVar[str] = "connections_error"


class ProjectError(ConnectionsError):
    """The project folder cannot be read (it does not exist, or is not a folder)."""

    code = "project_error"


class ToolInputError(ConnectionsError):
    """A tool's input failed validation before `execute` ran."""

    code = "invalid_tool_input"

    def __init__(self, tool: str, details: str) -> None:
        super().__init__(f"invalid input for tool {tool!r}: {details}")
        self.tool = tool
        self.details = details


class EnvironmentVariableMissing(ConnectionsError):
    """A `${VAR}` reference names a variable that is not set."""

    code = "environment_variable_missing"

    def __init__(self, connection: str, variable: str, where: str) -> None:
        super().__init__(
            f"connection {connection!r}: {where} reads ${{{variable}}}, but {variable} is not set; "
            f"export {variable} before starting agent-sdk"
        )
        self.connection = connection
        self.variable = variable
