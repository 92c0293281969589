"""The project document `agent-sdk info --json` prints and `GET /v1/info` serves. Never a secret."""

from __future__ import annotations

from typing import Any

from connections import ConnectionDefinition, Project
from connections.serving import redact, shown_command, shown_url

__all__ = ["connection_info", "project_info"]


def connection_info(defn: ConnectionDefinition, *, show_args: bool = False) -> dict[str, Any]:
    """One connection as `info` shows it: shape and flags, never header/env values; the URL's shape
    (docs/connections.md, "Secrets in messages"); stdio args only with `show_args` (`info --show-args`)."""
    out: dict[str, Any] = {
        "name": defn.name,
        "kind": defn.kind,
        "hostOnly": defn.host_only,
        "advertiseTools": defn.advertise_tools,
        "oauth": defn.oauth is not None,
        "hasAuth": defn.auth is not None,
        "servers": None if not defn.account else (defn.servers if defn.servers == "*" else list(defn.servers)),
        "headers": sorted(defn.headers),
    }
    if defn.url is not None:
        out["url"] = shown_url(defn.url)
    if defn.command is not None:
        out["command"] = shown_command(defn.command)
        if show_args:
            out["args"] = [redact(a) for a in defn.args]
    if defn.description:
        out["description"] = defn.description
    if defn.linkable:
        out["linkable"] = True
    return out


def project_info(project: Project, *, show_args: bool = False) -> dict[str, Any]:
    """The whole document: connections, tools, extensions and diagnostics (stdio args only with `show_args`)."""
    root = project.root
    return {
        "agent": {"name": root.name, "root": str(root)},
        "connections": [
            connection_info(project.connections[n], show_args=show_args) for n in sorted(project.connections)
        ],
        "tools": [
            {
                "name": tool.name,
                "title": tool.title,
                "description": tool.description,
                "effect": tool.effect,
                "source": "authored" if "__" not in tool.name else "extension",
                "inputSchema": tool.input_schema,
            }
            for tool in (project.tools[n] for n in sorted(project.tools))
        ],
        "extensions": [
            {"namespace": ext.namespace, "tools": sorted(ext.tools), "connections": sorted(ext.connections)}
            for ext in (project.extensions[n] for n in sorted(project.extensions))
        ],
        "diagnostics": [d.to_json(root) for d in project.diagnostics],
    }
