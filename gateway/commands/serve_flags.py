"""`agent-sdk serve`'s flags and the settings they make.

Every flag also reads an `AGENT_SDK_*` variable (the flag wins): `--host` AGENT_SDK_HOST,
`--port` AGENT_SDK_PORT, `--state-root` AGENT_SDK_STATE_ROOT, `--bearer-token`
AGENT_SDK_BEARER_TOKEN, `--operator-token` AGENT_SDK_OPERATOR_TOKEN (docs/http-api.md, "Roles"),
`--operator-scope` AGENT_SDK_OPERATOR_SCOPE, `--operator-claim` AGENT_SDK_OPERATOR_CLAIM (OAuth operators),
`--metrics-token` AGENT_SDK_METRICS_TOKEN (docs/operations.md),
`--allow-anonymous` AGENT_SDK_ALLOW_ANONYMOUS=1, `--runner`
AGENT_SDK_RUNNER, `--hub` AGENT_SDK_HUB=1 (the account hub API, docs/accounts.md),
`--no-fast-calls` AGENT_SDK_FAST_CALLS=0, `--start-limit` AGENT_SDK_START_LIMIT and `--warm`
AGENT_SDK_WARM=1 (docs/clients.md), `--page-size` AGENT_SDK_PAGE_SIZE (docs/http-api.md),
`--otlp-endpoint` AGENT_SDK_OTLP_ENDPOINT (docs/operations.md, "Tracing"), `--state-url` AGENT_SDK_STATE_URL
(Redis shared by replicas, docs/deploy.md), `--state-key-file` AGENT_SDK_STATE_KEY_FILE (or the key itself
in AGENT_SDK_STATE_KEY), `--turn-lease` AGENT_SDK_TURN_LEASE_S, `--log-format`
AGENT_SDK_LOG_FORMAT (docs/operations.md); the connection limits and `--trusted-proxy` as
docs/http-api.md lists them. A bearer token (or a Redis URL with a password) is better passed
through the environment (a flag shows in `ps`). `--stdio` serves the server tools over stdio
instead (docs/desktop-clients.md).
"""

from __future__ import annotations

import argparse
import os

from pydantic import ValidationError

from ..errors import CliError
from ..logs import LogFormat
from ..runners._select import RUNNERS
from ..settings import ServeSettings
from ._common import add_project_args, state_root_of

__all__ = ["add_serve_flags", "log_format_of", "settings_from_args", "settings_problems"]


_LIMIT_FLAGS: tuple[tuple[str, type, str, str, str], ...] = (
    ("--timeout-keep-alive", float, "S", "close a connection idle this long, a fresh one included (default 5)",
     "AGENT_SDK_TIMEOUT_KEEP_ALIVE"),
    ("--timeout-header", float, "S", "a request head must arrive within S of its first byte (default 10)",
     "AGENT_SDK_TIMEOUT_HEADER"),
    ("--timeout-body", float, "S", "a request body must arrive within S of its head (default 30)",
     "AGENT_SDK_TIMEOUT_BODY"),
    ("--max-header-bytes", int, "N", "a larger request head is 431 (default 65536)", "AGENT_SDK_MAX_HEADER_BYTES"),
    ("--max-connections", int, "N", "connections past N get 503 and are closed (default 1000)",
     "AGENT_SDK_MAX_CONNECTIONS"),
)  # fmt: skip
"""The connection-limit flags: flag, type, metavar, help, variable (`ServeSettings` reads the variables)."""


def add_serve_flags(p: argparse.ArgumentParser) -> None:
    """Every `serve` flag, on `p`."""
    add_project_args(p)
    p.add_argument("--host", default=None, help="bind address; default 127.0.0.1 or $AGENT_SDK_HOST")
    p.add_argument("--port", type=int, default=None, help="port; default 3000 or $AGENT_SDK_PORT")
    p.add_argument(
        "--bearer-token",
        action="append",
        default=None,
        metavar="T",
        help="admit requests with Authorization: Bearer T (repeatable, one principal each); or $AGENT_SDK_BEARER_TOKEN",
    )
    p.add_argument(
        "--operator-token",
        action="append",
        default=None,
        metavar="T",
        help="admit Authorization: Bearer T as an operator: the console's actions, logins, failures, metrics "
        "(repeatable); or $AGENT_SDK_OPERATOR_TOKEN (comma-separated)",
    )
    p.add_argument(
        "--metrics-token",
        action="append",
        default=None,
        metavar="T",
        help="a scrape credential: Bearer T reads GET /v1/metrics and nothing else (repeatable); "
        "or $AGENT_SDK_METRICS_TOKEN",
    )
    p.add_argument(
        "--oauth-issuer",
        action="append",
        default=None,
        metavar="URL",
        help="admit OAuth access tokens from this authorization server (repeatable; docs/deploy.md); "
        "or $AGENT_SDK_OAUTH_ISSUER (comma-separated)",
    )
    p.add_argument(
        "--public-url",
        default=None,
        metavar="URL",
        help="with --oauth-issuer: the gateway's external https base URL, the audience tokens must name; "
        "or $AGENT_SDK_PUBLIC_URL",
    )
    p.add_argument(
        "--oauth-scope",
        action="append",
        default=None,
        metavar="SCOPE",
        help="with --oauth-issuer: a scope every token must carry, or /PATH=SCOPE for routes under PATH "
        "(repeatable); or $AGENT_SDK_OAUTH_SCOPE (space-separated)",
    )
    p.add_argument(
        "--oauth-audience",
        action="append",
        default=None,
        metavar="AUD",
        help="with --oauth-issuer: a further token audience to accept (e.g. Entra ID's app client id; repeatable); "
        "or $AGENT_SDK_OAUTH_AUDIENCE (space-separated)",
    )
    p.add_argument(
        "--dpop-nonce",
        action="store_true",
        default=None,
        help="with --oauth-issuer: DPoP proofs must carry a nonce the gateway gives (RFC 9449 section 9; "
        "replicas need the same state key); or $AGENT_SDK_DPOP_NONCE=1",
    )
    p.add_argument(
        "--operator-scope",
        action="append",
        default=None,
        metavar="SCOPE",
        help="with --oauth-issuer: a token with this scope is an operator's (repeatable); "
        "or $AGENT_SDK_OPERATOR_SCOPE (space-separated)",
    )
    p.add_argument(
        "--operator-claim",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="with --oauth-issuer: a token whose claim NAME is VALUE, or a list holding it (e.g. groups=admins), "
        "is an operator's (repeatable); or $AGENT_SDK_OPERATOR_CLAIM (comma-separated)",
    )
    p.add_argument(
        "--oidc-client-id",
        default=None,
        metavar="ID",
        help="with --oauth-issuer: the client registered at the IdP for browser sign-in, redirect URI "
        "<public URL>/v1/oauth/callback (its secret in $AGENT_SDK_OIDC_CLIENT_SECRET); default: the gateway "
        "registers one itself; or $AGENT_SDK_OIDC_CLIENT_ID",
    )
    p.add_argument(
        "--allow-anonymous",
        action="store_true",
        default=None,
        help="admit everyone as one principal (demo only); or $AGENT_SDK_ALLOW_ANONYMOUS=1",
    )
    p.add_argument(
        "--runner", choices=RUNNERS, default=None, help="turn runner; default deterministic or $AGENT_SDK_RUNNER"
    )
    p.add_argument(
        "--hub",
        action="store_true",
        default=None,
        help="also serve the account hub API for linkable=True connections (docs/accounts.md); or $AGENT_SDK_HUB=1",
    )
    p.add_argument(
        "--state-url",
        default=None,
        metavar="URL",
        help="redis://HOST:PORT/DB: share sessions, events, hub keys and OAuth tokens with other replicas "
        "(docs/deploy.md); or $AGENT_SDK_STATE_URL. Default: files under --state-root",
    )
    p.add_argument(
        "--state-key-file",
        default=None,
        metavar="PATH",
        help="the deployment's state key (mode 0600; make one with `agent-sdk state-key --out PATH`), the same for "
        "every replica; needed with --state-url unless $AGENT_SDK_STATE_KEY holds it; or $AGENT_SDK_STATE_KEY_FILE",
    )
    p.add_argument(
        "--turn-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --state-url: a turn's lease; a dead replica's turn ends interrupted within this + 1 s "
        "(default 10); or $AGENT_SDK_TURN_LEASE_S",
    )
    p.add_argument(
        "--access-log",
        action="store_true",
        default=None,
        help="log one line per request (off by default); or $AGENT_SDK_ACCESS_LOG=1",
    )
    p.add_argument(
        "--no-fast-calls",
        dest="fast_calls",
        action="store_false",
        default=None,
        help="send every pooled tools/call through the MCP SDK's HTTP transport (debugging); "
        "or $AGENT_SDK_FAST_CALLS=0",
    )
    p.add_argument(
        "--start-limit",
        type=int,
        default=None,
        metavar="N",
        help="start at most N stdio children at once (default: the number of cores); or $AGENT_SDK_START_LIMIT",
    )
    p.add_argument(
        "--page-size",
        type=int,
        default=None,
        metavar="N",
        help="items per page of resources/list, resources/templates/list and prompts/list on /v1/mcp/tools "
        "(default 100); or $AGENT_SDK_PAGE_SIZE",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        default=None,
        help="start every connection when the gateway starts, not at the first use; or $AGENT_SDK_WARM=1",
    )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=None,
        metavar="ADDR",
        help="a reverse proxy (address or CIDR, repeatable) whose X-Forwarded-For/Forwarded name the client; "
        "needs --bearer-token; or $AGENT_SDK_TRUSTED_PROXY (comma-separated)",
    )
    limits = p.add_argument_group("connection limits (docs/http-api.md)")
    for flag, kind, metavar, text, var in _LIMIT_FLAGS:
        limits.add_argument(flag, type=kind, default=None, metavar=metavar, help=f"{text}; or ${var}")
    audit = p.add_argument_group("audit and approvals (docs/audit.md)")
    audit.add_argument(
        "--audit-required",
        action="store_true",
        help="refuse calls while the audit queue is full; or $AGENT_SDK_AUDIT_REQUIRED=1",
    )
    audit.add_argument(
        "--audit-argument-digest",
        action="store_true",
        help="record an HMAC-SHA256 of each call's arguments under a key derived from the state key (never the "
        "arguments); or $AGENT_SDK_AUDIT_ARGUMENT_DIGEST=1",
    )
    audit.add_argument(
        "--approval-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a call waits for an operator's approval (default 300; no answer is a denial); "
        "or $AGENT_SDK_APPROVAL_TIMEOUT",
    )
    audit.add_argument(
        "--approval-separation",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refuse an operator approving a call it holds itself (default: on, off in loopback-strict mode, "
        "where the one local user is every principal); or $AGENT_SDK_APPROVAL_SEPARATION=1|0",
    )
    audit.add_argument(
        "--principal-claim",
        default=None,
        metavar="CLAIM",
        help="with --oauth-issuer: the token claim approvals, audit records and the console show a person by "
        "(default email, then name, then sub); or $AGENT_SDK_PRINCIPAL_CLAIM",
    )
    p.add_argument(
        "--stdio",
        action="store_true",
        help="serve the server tools (what /v1/mcp/tools lists) as a stdio MCP server, for desktop clients",
    )
    p.add_argument(
        "--discovery",
        action="store_true",
        help="discovery mode: tools/list offers search_tools, describe_tool and call_tool (docs/discovery.md)",
    )
    p.add_argument(
        "--discovery-pin",
        action="append",
        default=None,
        metavar="NAME",
        help="in discovery mode, also list the tools of this name or glob (repeatable)",
    )
    p.add_argument(
        "--server",
        default=None,
        metavar="NAME",
        help="with --stdio: serve the curated server agent/servers/NAME.py instead (docs/curated-servers.md)",
    )
    p.add_argument(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help="send traces and metrics over OTLP to URL (HTTP/protobuf; gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc), "
        "needs agent-sdk[otel]; or $AGENT_SDK_OTLP_ENDPOINT or the OTEL_* variables (docs/operations.md)",
    )
    p.add_argument(
        "--log-format",
        choices=("text", "json"),
        default=None,
        help="text (default) or json (one object per line, for log shippers); or $AGENT_SDK_LOG_FORMAT",
    )


def settings_from_args(args: argparse.Namespace) -> ServeSettings:
    """Flags over `AGENT_SDK_*` variables over defaults. Raises `CliError` naming a bad value (never a token)."""
    try:
        return ServeSettings.from_env(
            os.environ,
            host=args.host,
            port=args.port,
            state_root=state_root_of(args),
            bearer_tokens=tuple(args.bearer_token) if args.bearer_token else None,
            operator_tokens=tuple(args.operator_token) if args.operator_token else None,
            metrics_tokens=tuple(args.metrics_token) if getattr(args, "metrics_token", None) else None,
            allow_anonymous=args.allow_anonymous,
            oauth_issuers=tuple(args.oauth_issuer) if getattr(args, "oauth_issuer", None) else None,
            public_url=getattr(args, "public_url", None),
            oauth_scopes=tuple(args.oauth_scope) if getattr(args, "oauth_scope", None) else None,
            oauth_audiences=tuple(args.oauth_audience) if getattr(args, "oauth_audience", None) else None,
            dpop_nonce=getattr(args, "dpop_nonce", None),
            operator_scopes=tuple(args.operator_scope) if getattr(args, "operator_scope", None) else None,
            operator_claims=tuple(args.operator_claim) if getattr(args, "operator_claim", None) else None,
            oidc_client_id=getattr(args, "oidc_client_id", None),
            runner=args.runner,
            hub=args.hub,
            access_log=args.access_log,
            fast_calls=args.fast_calls,
            start_limit=args.start_limit,
            page_size=args.page_size,
            warm=args.warm,
            trusted_proxies=tuple(args.trusted_proxy) if args.trusted_proxy else None,
            idle_timeout_s=args.timeout_keep_alive,
            header_timeout_s=args.timeout_header,
            body_timeout_s=args.timeout_body,
            max_header_bytes=args.max_header_bytes,
            max_connections=args.max_connections,
            state_url=getattr(args, "state_url", None),
            turn_lease_s=getattr(args, "turn_lease", None),
            state_key_file=getattr(args, "state_key_file", None),
            audit_required=True if getattr(args, "audit_required", False) else None,
            audit_argument_digest=True if getattr(args, "audit_argument_digest", False) else None,
            approval_timeout_s=getattr(args, "approval_timeout", None),
            approval_separation=getattr(args, "approval_separation", None),
            principal_claim=getattr(args, "principal_claim", None),
            discovery=True if getattr(args, "discovery", False) else None,
            discovery_pins=tuple(args.discovery_pin) if getattr(args, "discovery_pin", None) else None,
        )
    except ValidationError as exc:
        raise CliError(f"invalid serve settings: {settings_problems(exc)}") from None


_FLAGS = {
    "host": "--host",
    "port": "--port",
    "state_root": "--state-root",
    "bearer_tokens": "--bearer-token",
    "operator_tokens": "--operator-token",
    "metrics_tokens": "--metrics-token",
    "oauth_issuers": "--oauth-issuer",
    "public_url": "--public-url",
    "oauth_scopes": "--oauth-scope",
    "oauth_audiences": "--oauth-audience",
    "dpop_nonce": "--dpop-nonce",
    "operator_scopes": "--operator-scope",
    "operator_claims": "--operator-claim",
    "oidc_client_id": "--oidc-client-id",
    "runner": "--runner",
    "max_body_bytes": "AGENT_SDK_MAX_BODY_BYTES",
    "trusted_proxies": "--trusted-proxy",
    "idle_timeout_s": "--timeout-keep-alive",
    "header_timeout_s": "--timeout-header",
    "body_timeout_s": "--timeout-body",
    "max_header_bytes": "--max-header-bytes",
    "max_connections": "--max-connections",
    "state_key_file": "--state-key-file",
    "approval_timeout_s": "--approval-timeout",
    "principal_claim": "--principal-claim",
}


def log_format_of(args: argparse.Namespace) -> LogFormat:
    """`--log-format`, else `AGENT_SDK_LOG_FORMAT`, else text. Raises `CliError` for another value."""
    value = args.log_format or os.environ.get("AGENT_SDK_LOG_FORMAT") or "text"
    if value not in ("text", "json"):
        raise CliError(f"AGENT_SDK_LOG_FORMAT must be text or json, got {value[:40]!r}")
    return "json" if value == "json" else "text"


def settings_problems(exc: ValidationError) -> str:
    """One sentence per bad setting, named by its flag; no pydantic wording ("Value error, ...")."""
    out: list[str] = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        field = str(error["loc"][0]) if error["loc"] else None
        out.append(f"{_FLAGS.get(field, field)}: {message}" if field else message)
    return "; ".join(out)
