"""`ConnectionDefinition`: what a definition file's `define_connection(...)` (`_define.py`) makes.

A definition file calls `define_connection` once at module level. The call never raises for a
bad field: it records each problem (with the line of the call) on the definition, and the loader
turns them into diagnostics, so `agent-sdk validate` reports every broken file in one run.
"""

# Definition files are untyped user code: the runtime isinstance checks on typed parameters are the point.
# pyright: reportUnnecessaryIsInstance=false, reportUnnecessaryComparison=false

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from mcp_types import LoggingLevel

from oauth import OAuthConfig

from .._redact import shown_url
from .._uris import canonical_uri
from ._field_values import offered
from ._limits import DEFAULT_IDENTITY_IDLE_TIMEOUT, DEFAULT_MAX_IDENTITIES, DEFAULT_MAX_RESULT_BYTES, Timeouts
from ._problems import Problem
from ._sandbox import Sandbox

__all__ = [
    "AuthCallback",
    "ConnectionDefinition",
    "ConnectionKind",
]

ConnectionKind = Literal["stdio", "http", "sse", "account"]
Transport = Literal["streamable-http", "sse"]
ProtocolMode = Literal["auto", "legacy", "modern"]
UpstreamSessions = Literal["shared", "per_principal"]
Grants = Literal["gateway", "per_principal"]
"""How many upstream sessions a connection keeps: one for everyone, or one per calling principal."""
AuthCallback = Callable[[Any], "Mapping[str, Any] | Awaitable[Mapping[str, Any]]"]
"""`auth(session) -> {"headers": {...}}`, sync or async; `session` is a `SessionInfo`."""


@dataclass(frozen=True, slots=True)
class ConnectionDefinition:
    """One MCP connection as the project defines it. `name` and `source` come from the file's path."""

    url: str | None = None
    transport: Transport = "streamable-http"
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict[str, str])
    cwd: str | None = None
    oauth: OAuthConfig | None = None
    host_only: bool = False
    account: bool = False
    servers: tuple[str, ...] | Literal["*"] = "*"
    auth: AuthCallback | None = field(default=None, repr=False, compare=False)
    advertise_tools: bool = False
    advertise_resources: bool | frozenset[str] = False
    """True: every resource and template; a set: only those URIs and URI templates (docs/connections.md)."""
    advertise_prompts: bool | frozenset[str] = False
    """True: every prompt; a set: only those names."""
    deny_resources: frozenset[str] = frozenset()
    deny_prompts: frozenset[str] = frozenset()
    timeouts: Timeouts = field(default_factory=Timeouts)
    allow_tools: frozenset[str] | None = None
    deny_tools: frozenset[str] = frozenset()
    require_approval: bool | frozenset[str] = False
    """True: every call of its tools waits for an operator's approval; a set: the calls of those tools only
    (docs/audit.md, "Human approval")."""
    protocol: ProtocolMode = "auto"
    description: str | None = None
    linkable: bool = False
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """The largest answer (one JSON-RPC message, in bytes) accepted from the upstream; larger ones are refused."""
    min_log_level: LoggingLevel | None = None
    """The least severe upstream log message forwarded to a caller (None: whatever the caller asks for)."""
    bridge: bool = False
    """Hand this stdio child the account bridge's URL and secret (opt-in; never for linkable connections)."""
    max_identities: int = DEFAULT_MAX_IDENTITIES
    """`auth` connections: the most identities kept at once (least recently used idle one closed first)."""
    identity_idle_timeout: float = DEFAULT_IDENTITY_IDLE_TIMEOUT
    """`auth` connections: seconds after which an unused identity's client is closed."""
    upstream_sessions: UpstreamSessions = "shared"
    """`shared`: one pooled upstream session serves every caller; `per_principal`: one per calling principal
    (kept in the identity pool, bounded by `max_identities` and `identity_idle_timeout`; docs/connections.md)."""
    grants: Grants = "gateway"
    """`oauth` connections: `gateway`, one grant the deployment logged in with (`agent-sdk mcp oauth NAME`);
    `per_principal`, each calling principal signs in with its own grant, and its calls (and upstream
    session) are its own (implies `upstream_sessions="per_principal"`; docs/oauth.md#per-user-grants)."""
    optional: bool = False
    """A listing of `/v1/mcp/tools` leaves this connection's tools out while it cannot be listed (named in a log
    line and in `/v1/connections`) instead of failing closed; its calls still fail (docs/connections.md)."""
    dpop: bool | None = None
    """`oauth` connections: bind new grants to a DPoP key (RFC 9449) only where the upstream asks for it (None),
    always (True) or never (False); docs/oauth.md, "DPoP-bound grants"."""
    pin: bool = True
    """Check its listings against `mcp.lock` when the project has one (False: never; docs/connections.md)."""
    trace_content: bool = False
    """Put its tool calls' arguments and results on their trace spans (off by default: they may hold user
    data; docs/operations.md, "Tracing")."""
    sandbox: Sandbox | bool | None = None
    """stdio: run the child under bubblewrap with these grants (False: never; None: the project's default,
    `agent/sandbox.toml`, applied by the loader; docs/connections.md, "Sandboxed stdio servers")."""
    name: str = ""
    source: Path | None = None
    line: int | None = None
    problems: tuple[Problem, ...] = field(default=(), repr=False, compare=False)

    @property
    def kind(self) -> ConnectionKind:
        """`stdio`, `http`, `sse` or `account`."""
        if self.account:
            return "account"
        if self.command is not None:
            return "stdio"
        return "sse" if self.transport == "sse" else "http"

    @property
    def sandboxed(self) -> Sandbox | None:
        """The grants of a sandboxed stdio child, or None when it runs with the gateway's own rights."""
        return self.sandbox if isinstance(self.sandbox, Sandbox) and self.command is not None else None

    @property
    def attached(self) -> bool:
        """Reached by the model through the meta-tools (neither advertised nor host-only)."""
        return not self.advertise_tools and not self.host_only

    def allows_tool(self, tool: str) -> bool:
        """Whether the allow/deny lists let `tool` through (deny wins)."""
        if tool in self.deny_tools:
            return False
        return self.allow_tools is None or tool in self.allow_tools

    def needs_approval(self, tool: str) -> bool:
        """Whether a call of `tool` waits for an operator's approval (`require_approval`)."""
        approval = self.require_approval
        return approval if isinstance(approval, bool) else tool in approval

    def allows_prompt(self, prompt: str) -> bool:
        """Whether `advertise_prompts` and `deny_prompts` put `prompt` on `/v1/mcp/tools` (deny wins)."""
        return offered(self.advertise_prompts, self.deny_prompts, prompt, prompt)

    def allows_resource(self, uri: str) -> bool:
        """Whether `advertise_resources` and `deny_resources` offer the resource at `uri`: it is named, or
        one named URI template matches it (deny wins, by URI or by a matching template). Both sides are
        compared in their canonical form (`canonical_uri`)."""
        uri = canonical_uri(uri)
        return offered(self.advertise_resources, self.deny_resources, uri, uri, match=True)

    def allows_template(self, template: str) -> bool:
        """Whether `advertise_resources` and `deny_resources` offer the URI template `template` (canonical forms)."""
        template = canonical_uri(template, template=True)
        return offered(self.advertise_resources, self.deny_resources, template, template)

    def named(self, name: str, source: Path | None, **changes: Any) -> ConnectionDefinition:
        """A copy bound to its path-derived name (and any loader-imposed changes)."""
        return replace(self, name=name, source=source, **changes)

    def __repr__(self) -> str:
        # Header and env values may carry secrets read from the environment: show names only.
        target = shown_url(self.url) if self.url else self.command or ("account" if self.account else "?")
        return (
            f"ConnectionDefinition(name={self.name!r}, kind={self.kind!r}, target={target!r}, "
            f"headers={sorted(self.headers)}, env={sorted(self.env)})"
        )
