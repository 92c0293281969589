"""Import `mcp.json` (`{"mcpServers": {...}}` as Claude Desktop, Cursor and VS Code write it)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ._definitions import ConnectionDefinition, define_connection
from ._diagnostics import Diagnostic
from ._names import check_name
from ._problems import Problem

__all__ = ["load_mcp_json"]

# Keys that clients write for their own UI; they do not change the connection.
_CLIENT_KEYS = {"autoApprove", "alwaysAllow", "disabledTools", "description", "timeout", "envFile", "disabled"}
_FIELDS = {"command", "args", "env", "cwd", "url", "headers", "type", "transport"}


def _line_of(text: str, name: str) -> int | None:
    match = re.search(r'"' + re.escape(name) + r'"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


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
    if isinstance(doc, dict):
        # Claude Desktop and Cursor write "mcpServers"; VS Code writes "servers".
        servers = doc.get("mcpServers", doc.get("servers"))  # pyright: ignore[reportUnknownMemberType]
    if not isinstance(servers, dict):
        diag(1, 'mcp.json must be an object with "mcpServers": {"<name>": {...}}', "bad-mcp-json")
        return [], diags

    found: list[ConnectionDefinition] = []
    for name, entry in servers.items():  # pyright: ignore[reportUnknownVariableType]
        line = _line_of(text, str(name))  # pyright: ignore[reportUnknownArgumentType]
        if not isinstance(name, str) or (why := check_name(name, "connection")) is not None:
            diag(line, why or "server names must be strings", "bad-name")
            continue
        if not isinstance(entry, dict):
            diag(line, f"server {name!r} must be an object with command or url", "bad-mcp-json")
            continue
        entry_d: dict[str, Any] = entry  # pyright: ignore[reportUnknownVariableType]
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
        defn = define_connection(
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
