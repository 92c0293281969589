"""The project document `agent-sdk info --json` prints and `GET /v1/info` serves. Never a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from connections import ConnectionDefinition, Project

__all__ = ["connection_info", "project_info", "public_url"]


def public_url(url: str) -> str:
    """`url` without userinfo, query or fragment: those are where credentials hide."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def connection_info(defn: ConnectionDefinition) -> dict[str, Any]:
    """One connection as `info` shows it: shape and flags, never header/env values or args."""
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
        out["url"] = public_url(defn.url)
    if defn.command is not None:
        out["command"] = Path(defn.command).name
    if defn.description:
        out["description"] = defn.description
    if defn.linkable:
        out["linkable"] = True
    return out


def project_info(project: Project) -> dict[str, Any]:
    """The whole document: connections, tools, extensions and diagnostics."""
    root = project.root
    return {
        "agent": {"name": root.name, "root": str(root)},
        "connections": [connection_info(project.connections[n]) for n in sorted(project.connections)],
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
