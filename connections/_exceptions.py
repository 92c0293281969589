"""Errors of the connections package.

ConnectionsError                 root; `code` is the wire code the gateway maps to HTTP/JSON-RPC
├── ProjectError                 the project cannot be loaded at all (missing folder)
├── ToolInputError               400 invalid_tool_input: a tool's input failed validation
├── EnvironmentVariableMissing   a `${VAR}` in headers/env is not set
├── NotOffered                   no advertised connection offers that resource, template or prompt (or two do)
├── ClientError                  one MCP operation on a named connection failed; `connection` names it
│   ├── UnknownConnection        no connection by that name
│   ├── UnknownTool              the connection has no such tool (or its allow/deny lists hide it)
│   ├── UpstreamError            the upstream answered wrongly: JSON-RPC error, non-MCP body, HTTP error status
│   │   └── ResultTooLarge       the answer is over the connection's `max_result_bytes`: refused, not read
│   ├── UpstreamTimeout          connect, list or call ran past the definition's timeout
│   ├── ConnectionUnavailable    cannot start/connect, the server exited, or restarts are paused (crash loop)
│   │   └── AuthorizationUnavailable  an `oauth=` connection's authorization server does not answer (an outage)
│   ├── ConnectionUnauthorized   an `oauth=` connection has no tokens the server accepts (log in again)
│   │   └── SignInRequired       a `grants="per_principal"` connection: the calling principal has no grant of its own
│   └── AccountError             an account connection (docs/accounts.md) cannot use its hub
│       ├── AccountNotConfigured     no hub URL or API key (agent-sdk login, or AGENT_SDK_ACCOUNT_URL + _API_KEY)
│       ├── AccountUnauthorized      the hub refused the API key (wrong or revoked)
│       ├── AccountConnectorMissing  `servers=[...]` names connectors the account has not linked
│       └── AccountToolCollision     two selected connectors offer the same tool name
└── TurnBuildError               a turn's toolset cannot be built exactly (fail-closed); lists each TurnProblem
"""

from __future__ import annotations

from typing import ClassVar

from ._redact import redact

__all__ = [
    "AccountConnectorMissing",
    "AccountError",
    "AccountNotConfigured",
    "AccountToolCollision",
    "AccountUnauthorized",
    "AuthorizationUnavailable",
    "ClientError",
    "ConnectionUnauthorized",
    "ConnectionUnavailable",
    "ConnectionsError",
    "EnvironmentVariableMissing",
    "NotOffered",
    "ProjectError",
    "ResultTooLarge",
    "SignInRequired",
    "ToolInputError",
    "TurnBuildError",
    "TurnProblem",
    "UnknownConnection",
    "UnknownTool",
    "UpstreamError",
    "UpstreamTimeout",
]


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


class TurnBuildError(ConnectionsError):
    """A turn's toolset cannot be built exactly; `problems` lists every cause found in that build.

    Fail-closed: the turn does not run with fewer tools. `str(exc)` names each connection and tool.
    """

    code = "turn_build_failed"

    def __init__(self, problems: list[TurnProblem]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(
            f"the turn's toolset cannot be built ({count} problem{'s' if count != 1 else ''}); "
            f"no tools were offered:\n{lines}"
        )


class TurnProblem:
    """One cause of a `TurnBuildError`: which connection, which tool, and what went wrong."""

    __slots__ = ("code", "connection", "message", "subject", "tool")

    def __init__(
        self,
        code: str,
        message: str,
        *,
        connection: str | None = None,
        tool: str | None = None,
        subject: str = "tool",
    ) -> None:
        self.code = code
        self.message = redact(message)
        self.connection = connection
        self.tool = tool
        """The tool's name; for a listing of resources or prompts, the URI, template or prompt name (`subject`)."""
        self.subject = subject

    def __str__(self) -> str:
        where = []
        if self.connection is not None:
            where.append(f"connection {self.connection!r}")
        if self.tool is not None:
            where.append(f"{self.subject} {self.tool!r}")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def __repr__(self) -> str:
        return f"TurnProblem({self.code!r}, {str(self)!r})"

    def to_json(self) -> dict[str, str | None]:
        return {"code": self.code, "connection": self.connection, self.subject: self.tool, "message": self.message}


class ClientError(ConnectionsError):
    """One MCP operation on the connection `connection` failed; the message names it, never a secret."""

    code = "client_error"

    def __init__(self, connection: str, message: str) -> None:
        message = redact(message)  # docs/connections.md: no key, token or ${VAR} value in any message
        super().__init__(f"connection {connection!r}: {message}")
        self.connection = connection
        self.detail = message
        """The message without the connection prefix (for reports that name the connection already)."""


class UnknownConnection(ClientError):
    """No connection by that name is defined (or it is not reachable from here)."""

    code = "unknown_connection"


class UnknownTool(ClientError):
    """The connection has no tool by that name, or its allow/deny lists hide it."""

    code = "unknown_tool"

    def __init__(self, connection: str, tool: str, message: str | None = None) -> None:
        super().__init__(connection, message or f"has no tool {tool!r}")
        self.tool = tool


class UpstreamError(ClientError):
    """The upstream answered, but not with a result: a JSON-RPC error, a non-MCP body, an HTTP error status.

    For a JSON-RPC error answer, `rpc_code`, `rpc_message` and `rpc_data` are the upstream's own (None,
    "" and None otherwise): a forwarding server passes them on as its peer would have seen them directly.
    """

    code = "upstream_error"
    rpc_code: int | None = None
    rpc_message: str = ""
    rpc_data: object = None

    @classmethod
    def refused(
        cls, connection: str, message: str, *, rpc_code: int, rpc_message: str, rpc_data: object
    ) -> UpstreamError:
        """The error for the upstream's JSON-RPC error answer `rpc_code` / `rpc_message` / `rpc_data`."""
        error = cls(connection, message)
        error.rpc_code, error.rpc_message, error.rpc_data = rpc_code, rpc_message, rpc_data
        return error


class NotOffered(ConnectionsError):
    """No advertised connection offers the resource, template or prompt a peer named, or two do (fail closed)."""

    code = "not_offered"


class ResultTooLarge(UpstreamError):
    """The upstream's answer is over the connection's `max_result_bytes`; the rest of it was not read."""

    code = "result_too_large"

    @staticmethod
    def transport_note(limit: int) -> str:
        """What a transport says when it refuses an answer over `limit` (`translate` recognises it)."""
        return f"answer over the {limit}-byte limit (max_result_bytes)"


class UpstreamTimeout(ClientError):
    """Connect, `tools/list` or `tools/call` ran past the definition's timeout."""

    code = "upstream_timeout"


class ConnectionUnavailable(ClientError):
    """The upstream cannot be reached: it cannot start or connect, it exited, or restarts are paused."""

    code = "connection_unavailable"


class AuthorizationUnavailable(ConnectionUnavailable):
    """An `oauth=` connection's tokens need a refresh and its authorization server does not answer.

    Not a refused login: the grant is kept, and the same refresh works once the server is back.
    """

    code = "authorization_server_unreachable"


class ConnectionUnauthorized(ClientError):
    """An `oauth=` connection has no tokens the server accepts and cannot get new ones here.

    The message is the OAuth layer's own sentence (which login to run), never a token.
    """

    code = "connection_unauthorized"


class SignInRequired(ConnectionUnauthorized):
    """A `grants="per_principal"` connection and a principal without a usable grant of its own (none yet,
    refused at refresh, or logged out): the gateway answers with a sign-in URL for that principal
    (docs/oauth.md#per-user-grants). `principal` is whose grant is missing."""

    code = "sign_in_required"

    def __init__(self, connection: str, principal: str, message: str) -> None:
        super().__init__(connection, message)
        self.principal = principal


class AccountError(ClientError):
    """An account connection cannot use its hub (see docs/accounts.md)."""

    code = "account_error"


class AccountNotConfigured(AccountError):
    """No hub is configured: neither `agent-sdk login` nor `AGENT_SDK_ACCOUNT_URL` + `AGENT_SDK_API_KEY`."""

    code = "account_not_configured"


class AccountUnauthorized(AccountError):
    """The hub refused the API key: it is wrong, or it was revoked."""

    code = "account_unauthorized"


class AccountConnectorMissing(AccountError):
    """`servers=[...]` names connectors the account has not linked; `missing` lists them."""

    code = "account_connector_missing"

    def __init__(self, connection: str, missing: list[str], available: list[str]) -> None:
        have = ", ".join(available) or "none"
        names = ", ".join(repr(m) for m in missing)
        super().__init__(
            connection,
            f"the account has no linked connector {names} (it has: {have}); link it on the hub or remove it "
            "from servers=[...]",
        )
        self.missing = tuple(missing)
        self.available = tuple(available)


class AccountToolCollision(AccountError):
    """Two selected connectors offer a tool of the same name: a call could not be routed."""

    code = "account_tool_collision"

    def __init__(self, connection: str, tool: str, connectors: tuple[str, str]) -> None:
        first, second = connectors
        super().__init__(
            connection,
            f"tool {tool!r} is offered by both connector {first!r} and connector {second!r}; select one of them "
            "with servers=[...] or hide the tool with deny_tools=[...]",
        )
        self.tool = tool
        self.connectors = connectors
