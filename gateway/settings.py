"""`ServeSettings`: what `agent-sdk serve` runs with; every field also reads an `AGENT_SDK_*` variable."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

from .auth.oauth_issuers import require_https
from .auth.operator_grants import parse_claim

__all__ = ["AuthMode", "ServeSettings"]

AuthMode = Literal["loopback-strict", "bearer", "anonymous", "oauth"]

_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class ServeSettings(BaseModel):
    """Validated at the trust boundary (flags and environment). Tokens are `SecretStr`: `repr` is `***`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=3000, ge=0, le=65535)
    state_root: Path = Path(".agent-sdk")
    bearer_tokens: tuple[SecretStr, ...] = ()
    """`--bearer-token`: peer credentials, for the MCP, tool and session routes (never the operator routes)."""
    operator_tokens: tuple[SecretStr, ...] = ()
    """`--operator-token`: operator credentials, for the console's actions, logins, failures and metrics
    (docs/http-api.md, "Roles"); admitted beside whichever chain runs. Under loopback-strict the local user is
    an operator without one."""
    metrics_tokens: tuple[SecretStr, ...] = ()
    """`--metrics-token`: each reads `GET /v1/metrics` and nothing else (`auth/scrape_token.py`)."""
    allow_anonymous: bool = False
    runner: str = "deterministic"
    max_body_bytes: int = Field(default=4 * 1024 * 1024, gt=0)
    """Requests with a larger body get 413 before it is read (Content-Length) or as soon as it passes the cap."""
    max_wait_ms: int = Field(default=60_000, ge=0)
    """The cap on `ask`/`check` `waitMs`: a peer can never hold a request open longer."""
    default_wait_ms: int = Field(default=20_000, ge=0)
    toolset_ttl_s: float = Field(default=30.0, ge=0)
    """How long the session-less toolset (advertised listings) is reused for `tools/call` and direct calls."""
    policy_reload_s: float = Field(default=1.0, gt=0)
    """How often `agent/policies.cedar` is checked for a change (docs/policy.md)."""
    page_size: int = Field(default=100, ge=1, le=10_000)
    """Items per page of `resources/list`, `resources/templates/list` and `prompts/list` on `/v1/mcp/tools`."""
    access_log: bool = False
    """One log line per request (uvicorn's access log). Off by default: it costs about 5 % of a call's CPU."""
    hub: bool = False
    """Serve the account hub API (`/v1/hub/...`, API-key auth) for the `linkable=True` connections."""
    fast_calls: bool = True
    """Pooled `tools/call` and `tools/list` to Streamable HTTP upstreams take the fast wire (docs/clients.md)."""
    start_limit: int | None = Field(default=None, ge=1)
    """How many stdio children start at once (None: the number of cores); the rest queue (docs/clients.md)."""
    warm: bool = False
    discovery: bool = False
    """`--discovery`: `/v1/mcp/tools` and `serve --stdio` list meta-tools (docs/discovery.md)."""
    discovery_pins: tuple[str, ...] = ()
    """`--discovery-pin`: names or globs of tools listed beside the meta-tools in discovery mode."""
    """Start every pooled connection when the gateway starts, not at the first use."""
    trusted_proxies: tuple[str, ...] = ()
    """`--trusted-proxy`: networks (CIDR) whose `X-Forwarded-For`/`Forwarded` name the client."""
    idle_timeout_s: float = Field(default=5.0, gt=0)
    """A connection with no request under way is closed after this long (a fresh one included)."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """A request's head must arrive whole within this long of its first byte."""
    body_timeout_s: float = Field(default=30.0, gt=0)
    """A request's body must arrive whole within this long of its head."""
    max_header_bytes: int = Field(default=64 * 1024, ge=1024)
    """A larger request head (request line and headers) is 431."""
    max_connections: int = Field(default=1000, gt=0)
    """Open connections past this are answered 503 and closed at once."""

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            try:
                ipaddress.ip_network(network.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{network!r} is not an IP address or CIDR network (e.g. 10.0.0.0/8)") from None
        return value

    state_url: SecretStr | None = None
    """`redis://HOST:PORT/DB` (or `rediss://`, `unix://`): sessions, events, hub keys and OAuth tokens shared by
    every replica (docs/deploy.md). Unset: files under `state_root`. A `SecretStr`: the URL may hold a password."""
    state_key_file: Path | None = None
    """`--state-key-file`: the deployment's state key (`state_key.py`, docs/deploy.md), a 0600 file."""
    state_key: SecretStr | None = None
    """`AGENT_SDK_STATE_KEY`: the deployment's state key itself (base64url of 32 bytes); never a flag (`ps`)."""
    turn_lease_s: float = Field(default=10.0, ge=1.0, le=600.0)
    """With `state_url`: how long a turn's lease lasts unrenewed; a dead replica's turn is closed within this + 1 s."""

    audit_required: bool = False
    """`--audit-required`: a call is refused (503 `audit_unavailable`) while the audit queue is full (docs/audit.md)."""
    audit_argument_digest: bool = False
    """`--audit-argument-digest`: each record carries an HMAC-SHA256 of the call's arguments under a key derived
    from the state key (never the arguments)."""
    audit_max_bytes: int = Field(default=16 * 1024 * 1024, ge=4096)
    """The audit file is rotated past this size (`audit.jsonl.1` ... `.5` kept)."""
    audit_stream_max: int = Field(default=100_000, ge=100)
    """With `state_url`: the shared audit stream keeps about this many records (`XADD MAXLEN ~`)."""
    approval_timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    """`--approval-timeout`: how long a call waits for an operator's approval; no answer is a denial."""
    approval_separation: bool | None = None
    """`--approval-separation` / `--no-approval-separation`: an operator may not approve a call it is holding
    itself. None: on, except in loopback-strict mode, where the one local user is every principal (docs/audit.md)."""
    principal_claim: str | None = Field(default=None, min_length=1, max_length=100)
    """`--principal-claim`: the token claim an OAuth principal is shown by (default `email`, `name`, `sub`)."""

    oauth_issuers: tuple[str, ...] = ()
    """`--oauth-issuer`: authorization servers whose access tokens admit a peer (docs/http-api.md, "OAuth")."""
    public_url: str | None = None
    """`--public-url`: the gateway's external base URL, the audience a token must carry (default on loopback:
    `http://<host>:<port>`)."""
    oauth_scopes: tuple[str, ...] = ()
    """`--oauth-scope`: `SCOPE` (required on every route) or `/PATH=SCOPE` (required under that path)."""
    oauth_audiences: tuple[str, ...] = ()
    """`--oauth-audience`: a further `aud` a token may carry on every route (an IdP that names the API by an id
    of its own, as Entra ID's v2 tokens name the app's client id)."""
    dpop_nonce: bool = False
    """`--dpop-nonce`: DPoP proofs must carry a nonce the gateway made (RFC 9449 §9, `auth/dpop.py`)."""
    operator_scopes: tuple[str, ...] = ()
    """`--operator-scope`: an OAuth token with this scope is an operator's (docs/http-api.md, "Roles")."""
    operator_claims: tuple[str, ...] = ()
    """`--operator-claim NAME=VALUE`: an OAuth token whose claim NAME is VALUE (or a list holding it) is an
    operator's (`operator_grants`)."""
    oidc_client_id: str | None = None
    """`--oidc-client-id`: the client the gateway signs browsers in with at its `--oauth-issuer` (its secret, if
    any, in `AGENT_SDK_OIDC_CLIENT_SECRET`); default: one it registers itself (`console/_browser.py`)."""

    @field_validator("operator_claims")
    @classmethod
    def _operator_claims(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_claim(entry)
        return value

    @model_validator(mode="after")
    def _operator_grant_needs_issuer(self) -> ServeSettings:
        if (self.operator_scopes or self.operator_claims) and not self.oauth_issuers:
            raise ValueError(
                "--operator-scope and --operator-claim name OAuth tokens, so they need --oauth-issuer; add one, "
                "or give operators an --operator-token"
            )
        return self

    @field_validator("oauth_issuers")
    @classmethod
    def _issuers(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for issuer in value:
            require_https(issuer, "the issuer")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None:
            require_https(value, "the public URL")
            if "?" in value or "#" in value:
                raise ValueError("the public URL must have no query or fragment (RFC 8707 §2)")
        return value

    @field_validator("oauth_scopes")
    @classmethod
    def _scopes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            path, _, scope = entry.rpartition("=")
            if not scope.strip() or " " in scope or (path and not path.startswith("/")):
                raise ValueError(f"{entry[:80]!r} is not SCOPE or /PATH=SCOPE (e.g. mcp:tools, /v1/sessions=agent)")
        return value

    @model_validator(mode="after")
    def _oauth_needs_issuer(self) -> ServeSettings:
        if (self.public_url or self.oauth_scopes or self.oauth_audiences) and not self.oauth_issuers:
            raise ValueError(
                "--public-url, --oauth-scope and --oauth-audience take effect only with --oauth-issuer; add one"
            )
        if self.dpop_nonce and not self.oauth_issuers:
            raise ValueError("--dpop-nonce asks DPoP proofs of OAuth tokens, so it needs --oauth-issuer; add one")
        if self.oauth_issuers and self.allow_anonymous:
            raise ValueError("--allow-anonymous and --oauth-issuer exclude each other: drop one of them")
        if self.oauth_issuers and self.public_url is None and not self.loopback_bound:
            raise ValueError(
                f"--oauth-issuer on --host {self.host} needs --public-url: the URL clients reach the gateway at, "
                "which tokens must name as their audience"
            )
        return self

    def resource_url(self) -> str:
        """The public base URL tokens are for: `public_url`, else this loopback server's own."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return (self.public_url or f"http://{host}:{self.port}").rstrip("/")

    @field_validator("bearer_tokens", "operator_tokens", "metrics_tokens")
    @classmethod
    def _tokens_not_empty(cls, value: tuple[SecretStr, ...], info: ValidationInfo) -> tuple[SecretStr, ...]:
        what = {"bearer_tokens": "a bearer token", "operator_tokens": "an operator token"}.get(
            info.field_name or "", "a metrics token"
        )
        for token in value:
            if len(token.get_secret_value()) < 16:
                raise ValueError(f"{what} must be at least 16 characters (use a random value)")
        return value

    @model_validator(mode="after")
    def _roles_apart(self) -> ServeSettings:
        peers = {t.get_secret_value() for t in self.bearer_tokens}
        if any(t.get_secret_value() in peers for t in self.operator_tokens):
            raise ValueError(
                "the same token is given as --bearer-token and --operator-token: an operator token already "
                "calls tools, so give it once, as --operator-token"
            )
        return self

    @model_validator(mode="after")
    def _hub_needs_bearer(self) -> ServeSettings:
        # A hub holds credentials for others. Behind a reverse proxy every caller arrives from
        # loopback, so loopback trust (or anonymous) would hand the session API, /v1/info, the
        # bridge's connections and every non-linkable connection to anyone (docs/accounts.md).
        if self.hub and not self.bearer_tokens and not self.oauth_issuers:
            raise ValueError(
                "a hub (--hub) needs --bearer-token (or AGENT_SDK_BEARER_TOKEN) for everything outside the hub "
                "API: behind a proxy every caller looks like loopback"
                + ("; --allow-anonymous is refused on a hub" if self.allow_anonymous else "")
            )
        return self

    @field_validator("state_url")
    @classmethod
    def _redis_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://HOST:PORT/DB, rediss:// or unix:// URL")
        return value

    @model_validator(mode="after")
    def _metrics_token_apart(self) -> ServeSettings:
        others = {t.get_secret_value() for t in (*self.bearer_tokens, *self.operator_tokens)}
        if any(t.get_secret_value() in others for t in self.metrics_tokens):
            raise ValueError(
                "a metrics token must differ from every bearer and operator token (it may read metrics only)"
            )
        return self

    @model_validator(mode="after")
    def _one_policy(self) -> ServeSettings:
        if self.bearer_tokens and self.allow_anonymous:
            # Bearer would win and anonymous callers would be refused: say so rather than drop a flag.
            raise ValueError(
                "--allow-anonymous (AGENT_SDK_ALLOW_ANONYMOUS) and --bearer-token (AGENT_SDK_BEARER_TOKEN) "
                "exclude each other: with a token every caller must present it; drop one of them"
            )
        return self

    @property
    def auth_mode(self) -> AuthMode:
        """OAuth (static tokens beside it) wins, then bearer, then anonymous; loopback-strict is the default."""
        if self.oauth_issuers:
            return "oauth"
        if self.bearer_tokens:
            return "bearer"
        if self.allow_anonymous:
            return "anonymous"
        return "loopback-strict"

    @property
    def loopback_bound(self) -> bool:
        return self.host in _LOOPBACK_HOSTS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> ServeSettings:
        """Settings from `AGENT_SDK_*` variables, then `overrides` (flags given on the command line win).

        Raises `pydantic.ValidationError` naming the bad field.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        simple = {
            "host": "AGENT_SDK_HOST",
            "port": "AGENT_SDK_PORT",
            "state_root": "AGENT_SDK_STATE_ROOT",
            "runner": "AGENT_SDK_RUNNER",
            "max_body_bytes": "AGENT_SDK_MAX_BODY_BYTES",
            "start_limit": "AGENT_SDK_START_LIMIT",
            "idle_timeout_s": "AGENT_SDK_TIMEOUT_KEEP_ALIVE",
            "header_timeout_s": "AGENT_SDK_TIMEOUT_HEADER",
            "body_timeout_s": "AGENT_SDK_TIMEOUT_BODY",
            "max_header_bytes": "AGENT_SDK_MAX_HEADER_BYTES",
            "max_connections": "AGENT_SDK_MAX_CONNECTIONS",
            "state_url": "AGENT_SDK_STATE_URL",
            "turn_lease_s": "AGENT_SDK_TURN_LEASE_S",
            "state_key_file": "AGENT_SDK_STATE_KEY_FILE",
            "state_key": "AGENT_SDK_STATE_KEY",
            "page_size": "AGENT_SDK_PAGE_SIZE",
            "audit_max_bytes": "AGENT_SDK_AUDIT_MAX_BYTES",
            "audit_stream_max": "AGENT_SDK_AUDIT_STREAM_MAX",
            "approval_timeout_s": "AGENT_SDK_APPROVAL_TIMEOUT",
            "principal_claim": "AGENT_SDK_PRINCIPAL_CLAIM",
        }
        for field, var in simple.items():
            if env.get(var):
                values[field] = env[var]
        if env.get("AGENT_SDK_BEARER_TOKEN"):  # several, comma separated: rotate one while the others serve
            values["bearer_tokens"] = tuple(t.strip() for t in env["AGENT_SDK_BEARER_TOKEN"].split(",") if t.strip())
        if env.get("AGENT_SDK_OPERATOR_TOKEN"):
            values["operator_tokens"] = tuple(
                t.strip() for t in env["AGENT_SDK_OPERATOR_TOKEN"].split(",") if t.strip()
            )
        if env.get("AGENT_SDK_METRICS_TOKEN"):
            values["metrics_tokens"] = (env["AGENT_SDK_METRICS_TOKEN"],)
        if env.get("AGENT_SDK_OAUTH_ISSUER"):
            values["oauth_issuers"] = tuple(i.strip() for i in env["AGENT_SDK_OAUTH_ISSUER"].split(",") if i.strip())
        if env.get("AGENT_SDK_PUBLIC_URL"):
            values["public_url"] = env["AGENT_SDK_PUBLIC_URL"]
        if env.get("AGENT_SDK_OAUTH_AUDIENCE"):
            values["oauth_audiences"] = tuple(a for a in env["AGENT_SDK_OAUTH_AUDIENCE"].split() if a)
        if env.get("AGENT_SDK_OAUTH_SCOPE"):
            values["oauth_scopes"] = tuple(s for s in env["AGENT_SDK_OAUTH_SCOPE"].split() if s)
        if env.get("AGENT_SDK_OPERATOR_SCOPE"):
            values["operator_scopes"] = tuple(s for s in env["AGENT_SDK_OPERATOR_SCOPE"].split() if s)
        if env.get("AGENT_SDK_OIDC_CLIENT_ID"):
            values["oidc_client_id"] = env["AGENT_SDK_OIDC_CLIENT_ID"].strip()
        if env.get("AGENT_SDK_OPERATOR_CLAIM"):
            claims = env["AGENT_SDK_OPERATOR_CLAIM"].split(",")
            values["operator_claims"] = tuple(c.strip() for c in claims if c.strip())
        if env.get("AGENT_SDK_TRUSTED_PROXY"):
            values["trusted_proxies"] = tuple(p for p in env["AGENT_SDK_TRUSTED_PROXY"].split(",") if p.strip())
        if env.get("AGENT_SDK_ALLOW_ANONYMOUS", "").lower() in ("1", "true", "yes"):
            values["allow_anonymous"] = True
        if env.get("AGENT_SDK_DPOP_NONCE", "").lower() in ("1", "true", "yes"):
            values["dpop_nonce"] = True
        if env.get("AGENT_SDK_HUB", "").lower() in ("1", "true", "yes"):
            values["hub"] = True
        if env.get("AGENT_SDK_ACCESS_LOG", "").lower() in ("1", "true", "yes"):
            values["access_log"] = True
        for flag in ("audit_required", "audit_argument_digest"):
            if env.get(f"AGENT_SDK_{flag.upper()}", "").lower() in ("1", "true", "yes"):
                values[flag] = True
        if env.get("AGENT_SDK_WARM", "").lower() in ("1", "true", "yes"):
            values["warm"] = True
        if env.get("AGENT_SDK_FAST_CALLS", "").lower() in ("0", "false", "no"):
            values["fast_calls"] = False
        if env.get("AGENT_SDK_APPROVAL_SEPARATION", "").lower() in ("1", "true", "yes", "0", "false", "no"):
            values["approval_separation"] = env["AGENT_SDK_APPROVAL_SEPARATION"].lower() in ("1", "true", "yes")
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)
