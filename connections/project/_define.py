"""`define_connection(...)`: the call a definition file makes, and the checks behind it.

It never raises for a bad field: it records each problem (with the line of the call) on the
`ConnectionDefinition` it returns, and the loader turns them into diagnostics, so `agent-sdk validate`
reports every broken file in one run.
"""

# Definition files are untyped user code: the runtime isinstance checks on typed parameters are the point.
# pyright: reportUnnecessaryIsInstance=false, reportUnnecessaryComparison=false

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from oauth import OAuthConfig

from .._call_context import log_level_value
from .._redact import redact
from .._uris import canonical_entry
from ._definitions import AuthCallback, ConnectionDefinition, Transport
from ._field_values import FIELD_TYPES, offer, servers_value, shown, str_list, str_map, template_problems
from ._limits import DEFAULT_IDENTITY_IDLE_TIMEOUT, DEFAULT_MAX_IDENTITIES, DEFAULT_MAX_RESULT_BYTES, Timeouts
from ._problems import Problem
from ._sandbox import Sandbox, sandbox_value

__all__ = ["define_connection"]

_KNOWN = tuple(f.name for f in fields(ConnectionDefinition) if f.name not in {"name", "source", "line", "problems"})


def _call_site() -> tuple[Path, int]:
    frame = sys._getframe(2)  # pyright: ignore[reportPrivateUsage]  # the definition file's call site
    return Path(frame.f_code.co_filename), frame.f_lineno


def define_connection(
    *,
    url: str | None = None,
    transport: str | None = None,
    headers: Mapping[str, str] | None = None,
    command: str | None = None,
    args: list[str] | tuple[str, ...] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    oauth: bool | OAuthConfig = False,
    host_only: bool = False,
    account: bool = False,
    servers: list[str] | tuple[str, ...] | str | None = None,
    auth: AuthCallback | None = None,
    advertise_tools: bool = False,
    advertise_resources: bool | list[str] | tuple[str, ...] = False,
    advertise_prompts: bool | list[str] | tuple[str, ...] = False,
    deny_resources: list[str] | tuple[str, ...] | None = None,
    deny_prompts: list[str] | tuple[str, ...] | None = None,
    timeouts: Timeouts | Mapping[str, float] | None = None,
    allow_tools: list[str] | tuple[str, ...] | None = None,
    deny_tools: list[str] | tuple[str, ...] | None = None,
    require_approval: bool | list[str] | tuple[str, ...] = False,
    protocol: str = "auto",
    description: str | None = None,
    linkable: bool = False,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    bridge: bool = False,
    max_identities: int = DEFAULT_MAX_IDENTITIES,
    identity_idle_timeout: float = DEFAULT_IDENTITY_IDLE_TIMEOUT,
    min_log_level: str | None = None,
    pin: bool = True,
    trace_content: bool = False,
    upstream_sessions: str = "shared",
    grants: str = "gateway",
    sandbox: bool | Sandbox | Mapping[str, Any] | None = None,
    dpop: bool | None = None,
    optional: bool = False,
    **unknown: Any,
) -> ConnectionDefinition:
    """Define one MCP connection; the file's path gives it its name.

    Never raises for a bad value: problems are recorded and reported by `agent-sdk validate`
    (and block `serve` when they are errors). See docs/connections.md for every field.
    """
    origin, line = _call_site()
    problems: list[Problem] = []

    def bad(fname: str, value: object) -> None:
        problems.append(
            Problem("bad-field-type", f"field {fname!r} must be {FIELD_TYPES[fname]}, got {shown(fname, value)}")
        )

    for key in unknown:
        close = difflib.get_close_matches(key, _KNOWN, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(_KNOWN)}"
        problems.append(Problem("unknown-field", f"unknown field {key!r} in define_connection(...){hint}"))

    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        problems.append(
            Problem("bad-url", f"field 'url' must be an http:// or https:// URL, got {redact(url)!r}"[:200])
            if isinstance(url, str)
            else Problem("bad-field-type", f"field 'url' must be {FIELD_TYPES['url']}, got {type(url).__name__}")
        )
        url = None if not isinstance(url, str) else url

    chosen_transport: Transport = "streamable-http"
    if transport is not None:
        if transport in ("sse",):
            chosen_transport = "sse"
        elif transport in ("streamable-http", "http", "streamable_http", "streamableHttp"):
            chosen_transport = "streamable-http"
        else:
            bad("transport", transport)

    clean_headers = str_map("headers", headers, bad)
    clean_env = str_map("env", env, bad)
    clean_args = str_list("args", args, bad) or ()
    if command is not None and not isinstance(command, str):
        bad("command", command)
        command = None
    if cwd is not None and not isinstance(cwd, str | Path):
        bad("cwd", cwd)
        cwd = None

    oauth_config: OAuthConfig | None
    if oauth is True:
        oauth_config = OAuthConfig()
    elif oauth is False or oauth is None:
        oauth_config = None
    elif isinstance(oauth, OAuthConfig):
        oauth_config = oauth
    else:
        bad("oauth", oauth)
        oauth_config = None

    flags = {
        "host_only": host_only,
        "account": account,
        "advertise_tools": advertise_tools,
        "linkable": linkable,
        "bridge": bridge,
        "pin": pin,
        "optional": optional,
    }
    for fname, value in flags.items():
        if not isinstance(value, bool):
            bad(fname, value)
    host_only, account = host_only is True, account is True
    advertise_tools, linkable, bridge = advertise_tools is True, linkable is True, bridge is True
    pin = pin is not False
    optional = optional is True

    clean_servers = servers_value(servers, account, problems)

    if auth is not None and not callable(auth):
        bad("auth", auth)
        auth = None

    clean_timeouts = Timeouts()
    if isinstance(timeouts, Timeouts):
        clean_timeouts = timeouts
    elif isinstance(timeouts, Mapping):
        known = {f.name for f in fields(Timeouts)}
        extra = set(timeouts) - known
        if extra:
            problems.append(
                Problem(
                    "unknown-field",
                    f"unknown timeout {sorted(extra)[0]!r}; timeouts take {', '.join(sorted(known))}",
                )
            )
        values = {k: v for k, v in timeouts.items() if k in known}
        if all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in values.values()):
            clean_timeouts = Timeouts(**{k: float(v) for k, v in values.items()})
        else:
            problems.append(Problem("bad-field-type", "every timeout must be a positive number of seconds"))
    elif timeouts is not None:
        bad("timeouts", timeouts)

    offered_resources = offer("advertise_resources", advertise_resources, bad, problems)
    offered_prompts = offer("advertise_prompts", advertise_prompts, bad, problems)
    denied_resources = frozenset(str_list("deny_resources", deny_resources, bad) or ())
    denied_prompts = frozenset(str_list("deny_prompts", deny_prompts, bad) or ())
    for fname, entries in (("advertise_resources", offered_resources), ("deny_resources", denied_resources)):
        if isinstance(entries, frozenset):
            problems.extend(template_problems(fname, entries))
    # Decided in the canonical form of every resource URI (connections/_uris.py), as a peer's URI is.
    if isinstance(offered_resources, frozenset):
        offered_resources = frozenset(map(canonical_entry, offered_resources))
    denied_resources = frozenset(map(canonical_entry, denied_resources))

    allow = str_list("allow_tools", allow_tools, bad)
    deny = str_list("deny_tools", deny_tools, bad) or ()
    approval: bool | frozenset[str] = require_approval if isinstance(require_approval, bool) else False
    if not isinstance(require_approval, bool):
        approval = frozenset(str_list("require_approval", require_approval, bad) or ())
    if protocol not in ("auto", "legacy", "modern"):
        bad("protocol", protocol)
        protocol = "auto"
    if description is not None and not isinstance(description, str):
        bad("description", description)
        description = None
    if isinstance(max_result_bytes, bool) or not isinstance(max_result_bytes, int) or max_result_bytes < 1024:
        bad("max_result_bytes", max_result_bytes)
        max_result_bytes = DEFAULT_MAX_RESULT_BYTES
    if isinstance(max_identities, bool) or not isinstance(max_identities, int) or max_identities < 1:
        bad("max_identities", max_identities)
        max_identities = DEFAULT_MAX_IDENTITIES
    idle = identity_idle_timeout
    if isinstance(idle, bool) or not isinstance(idle, int | float) or not 0 < idle < float("inf"):
        bad("identity_idle_timeout", idle)
        idle = DEFAULT_IDENTITY_IDLE_TIMEOUT
    if min_log_level is not None and log_level_value(min_log_level) is None:
        bad("min_log_level", min_log_level)
        min_log_level = None
    if upstream_sessions not in ("shared", "per_principal"):
        bad("upstream_sessions", upstream_sessions)
        upstream_sessions = "shared"
    if grants not in ("gateway", "per_principal"):
        bad("grants", grants)
        grants = "gateway"
    if grants == "per_principal":
        upstream_sessions = "per_principal"  # a principal's token opens, and only serves, its own session
    if not isinstance(trace_content, bool):
        bad("trace_content", trace_content)
        trace_content = False
    if dpop is not None and not isinstance(dpop, bool):
        bad("dpop", dpop)
        dpop = None
    if dpop is not None and oauth_config is not None:
        if oauth_config.dpop is not None and oauth_config.dpop != dpop:
            problems.append(
                Problem(
                    "dpop-conflict",
                    f"dpop={dpop} contradicts OAuthConfig(dpop={oauth_config.dpop}); set it in one place",
                )
            )
        oauth_config = replace(oauth_config, dpop=dpop)

    clean_sandbox = sandbox_value(sandbox, problems)

    return ConnectionDefinition(
        url=url,
        transport=chosen_transport,
        headers=clean_headers,
        command=command,
        args=clean_args,
        env=clean_env,
        cwd=str(cwd) if cwd is not None else None,
        oauth=oauth_config,
        host_only=host_only,
        account=account,
        servers=clean_servers,
        auth=auth,
        advertise_tools=advertise_tools,
        advertise_resources=offered_resources,
        advertise_prompts=offered_prompts,
        deny_resources=denied_resources,
        deny_prompts=denied_prompts,
        timeouts=clean_timeouts,
        allow_tools=frozenset(allow) if allow is not None else None,
        deny_tools=frozenset(deny),
        require_approval=approval,
        protocol=protocol,
        description=description,
        linkable=linkable,
        max_result_bytes=max_result_bytes,
        min_log_level=min_log_level,  # type: ignore[arg-type]  # checked above
        bridge=bridge,
        max_identities=max_identities,
        identity_idle_timeout=float(idle),
        pin=pin,
        trace_content=trace_content,
        upstream_sessions=upstream_sessions,  # checked above
        grants=grants,  # checked above
        sandbox=clean_sandbox,
        dpop=dpop,
        optional=optional,
        source=origin,
        line=line,
        problems=tuple(problems),
    )
