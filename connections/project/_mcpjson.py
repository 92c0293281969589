"""Import `mcp.json` (`{"mcpServers": {...}}` as Claude Desktop, Cursor and VS Code write it)."""

from __future__ import annotations

import json
from json.decoder import scanstring  # pyright: ignore[reportAttributeAccessIssue]  # public, untyped in typeshed
from pathlib import Path
from typing import Any

from ._define import define_connection
from ._definitions import ConnectionDefinition
from ._diagnostics import Diagnostic
from ._names import check_name
from ._problems import Problem

__all__ = ["load_mcp_json"]

# Keys that clients write for their own UI; they do not change the connection.
_CLIENT_KEYS = {"autoApprove", "alwaysAllow", "disabledTools", "description", "timeout", "envFile", "disabled"}
_FIELDS = {"command", "args", "env", "cwd", "url", "headers", "type", "transport", "agent-sdk"}
# The entry's own "agent-sdk" object: the connection fields an mcp.json cannot otherwise say (other
# clients ignore the key). camelCase, as the rest of mcp.json is written.
_OWN = {
    "advertiseTools": "advertise_tools",
    "advertiseResources": "advertise_resources",
    "advertisePrompts": "advertise_prompts",
    "denyResources": "deny_resources",
    "denyPrompts": "deny_prompts",
    "hostOnly": "host_only",
    "allowTools": "allow_tools",
    "denyTools": "deny_tools",
    "timeouts": "timeouts",
    "protocol": "protocol",
    "description": "description",
    "oauth": "oauth",
    "pin": "pin",
    "traceContent": "trace_content",
    "upstreamSessions": "upstream_sessions",
    "grants": "grants",
    "optional": "optional",
    "dpop": "dpop",
    "sandbox": "sandbox",
}


def _server_lines(text: str, servers_key: str) -> dict[str, int]:
    """The line of each server's key inside `{"<servers_key>": {...}}` (only called on valid JSON).

    A plain search for `"name":` would also hit an `env` key of an earlier server with that name.
    """
    lines: dict[str, int] = {}
    parents: list[str | None] = []  # the key each open object/array sits under
    last_key: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            value, end = scanstring(text, i + 1)
            j = end
            while j < len(text) and text[j] in " \t\r\n":
                j += 1
            if j < len(text) and text[j] == ":":
                last_key = value
                if len(parents) == 2 and parents[1] == servers_key:
                    lines.setdefault(value, text.count("\n", 0, i) + 1)
            i = end
            continue
        if ch in "{[":
            parents.append(last_key)
            last_key = None
        elif ch in "}]" and parents:
            parents.pop()
        elif ch == ",":
            last_key = None
        i += 1
    return lines


def load_mcp_json(path: Path) -> tuple[list[ConnectionDefinition], list[Diagnostic]]:
    """The connections `path` declares and the diagnostics for what is wrong in it."""
    diags: list[Diagnostic] = []

    def diag(line: int | None, message: str, code: str, severity: str = "error") -> None:
        diags.append(Diagnostic(path, line, severity, message, code))  # type: ignore[arg-type]

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        diag(None, f"cannot read mcp.json ({exc.__class__.__name__}); make it a readable UTF-8 file", "unreadable")
        return [], diags
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        diag(exc.lineno, f"mcp.json is not valid JSON: {exc.msg} (column {exc.colno})", "bad-json")
        return [], diags
    servers: Any = None
    servers_key = "mcpServers"
    if isinstance(doc, dict):
        # Claude Desktop and Cursor write "mcpServers"; VS Code writes "servers".
        servers_key = "mcpServers" if "mcpServers" in doc else "servers"
        servers = doc.get(servers_key)
    if not isinstance(servers, dict):
        diag(
            1,
            'mcp.json must be an object with "mcpServers" (or VS Code\'s "servers") mapping each server name '
            'to {"command": ...} or {"url": ...}',
            "bad-mcp-json",
        )
        return [], diags
    lines = _server_lines(text, servers_key)

    found: list[ConnectionDefinition] = []
    for name, entry in servers.items():
        line = lines.get(str(name))
        name = str(name)  # JSON object keys are strings
        if (why := check_name(name, "server", "rename it in mcp.json")) is not None:
            diag(line, why, "bad-name")
            continue
        if not isinstance(entry, dict):
            diag(line, f"server {name!r} must be an object with command or url", "bad-mcp-json")
            continue
        entry_d: dict[str, Any] = entry
        if entry_d.get("disabled") is True:
            continue
        for key in sorted(set(entry_d) - _FIELDS - _CLIENT_KEYS):
            diag(line, f"server {name!r}: unknown key {key!r} ignored", "unknown-field", "warning")
        kind = entry_d.get("type", entry_d.get("transport"))
        transport: str | None = None
        if kind in ("sse",):
            transport = "sse"
        elif kind in ("http", "streamable-http", "streamableHttp", "streamable_http"):
            transport = "streamable-http"
        elif kind not in (None, "stdio"):
            diag(line, f"server {name!r}: unknown type {kind!r}; use stdio, http or sse", "bad-mcp-json")
            continue
        prompts = [
            f"{what[:-1] if what == 'headers' else what} {key!r}"
            for what in ("headers", "env")
            if isinstance(entry_d.get(what), dict)
            for key, value in entry_d[what].items()
            if isinstance(value, str) and "${input:" in value
        ]
        if prompts:
            diag(
                line,
                f"server {name!r}: {prompts[0]} reads a VS Code ${{input:...}} prompt, which agent-sdk cannot show; "
                "use ${env:VAR} (or ${VAR}) and export VAR",
                "unsupported-variable",
            )
            continue
        own = entry_d.get("agent-sdk", {})
        if not isinstance(own, dict):
            diag(
                line,
                f'server {name!r}: "agent-sdk" must be an object such as {{"advertiseTools": true}}',
                "bad-mcp-json",
            )
            continue
        own_d: dict[str, Any] = own
        strange = sorted(set(own_d) - set(_OWN))
        if strange:
            diag(
                line,
                f'server {name!r}: unknown key {strange[0]!r} in "agent-sdk"; use {", ".join(sorted(_OWN))}',
                "unknown-field",
            )
            continue
        defn = define_connection(
            **{_OWN[k]: v for k, v in own_d.items()},
            url=entry_d.get("url"),
            transport=transport,
            headers=entry_d.get("headers"),
            command=entry_d.get("command"),
            args=entry_d.get("args"),
            env=entry_d.get("env"),
            cwd=entry_d.get("cwd"),
        )
        found.append(defn.named(name, path, line=line, problems=_prefixed(name, defn.problems)))
    return found, diags


def _prefixed(name: str, problems: tuple[Problem, ...]) -> tuple[Problem, ...]:
    return tuple(Problem(p.code, f"server {name!r}: {p.message}", p.severity) for p in problems)
