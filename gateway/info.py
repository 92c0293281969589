"""The project document `agent-sdk info --json` prints and `GET /v1/info` serves. Never a secret.

A connection that advertises resources or prompts its server does not declare (issue 34 item 12) gets a
`warnings` entry (`undeclared_warnings`): `info` asks the servers, `/v1/info` says what its listings found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from connections import ConnectionDefinition, Project
from connections.serving import redact, shown_command, shown_url

__all__ = ["add_undeclared", "connection_info", "project_info", "sandbox_info", "undeclared_warning"]


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
        out["sandbox"] = sandbox_info(defn)
    if defn.description:
        out["description"] = defn.description
    if defn.linkable:
        out["linkable"] = True
    return out


def sandbox_info(defn: ConnectionDefinition) -> dict[str, Any] | None:
    """How a stdio child is sandboxed (docs/connections.md, "Sandboxed stdio servers"); None: the gateway's rights."""
    sandbox = defn.sandboxed
    if sandbox is None:
        return None
    return {
        "by": "bubblewrap",
        "writable": list(sandbox.writable),
        "readable": list(sandbox.readable),
        "network": sandbox.network,
        "maxProcesses": sandbox.max_processes,
        "maxOpenFiles": sandbox.max_open_files,
        "maxMemoryMb": sandbox.max_memory_mb,
        "summary": sandbox.describe(),
    }


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


def undeclared_warning(name: str, kinds: Sequence[str]) -> str:
    """The sentence for connection `name` advertising `kinds` ("resources", "prompts") its server does not declare."""
    fields = " and ".join(f"advertise_{kind}" for kind in kinds)
    return (
        f"connection {name!r}: {fields} {'is' if len(kinds) == 1 else 'are'} set, but its server declares no "
        f"{' or '.join(kinds)} capability, so it offers none; drop {fields} from its definition"
    )


def add_undeclared(doc: dict[str, Any], undeclared: Mapping[str, Sequence[str]]) -> list[str]:
    """Give each connection of `doc` that `undeclared` names a `warnings` entry (code `undeclared-capability`);
    returns the sentences, in the order of the connections."""
    said: list[str] = []
    for entry in doc["connections"]:
        kinds = undeclared.get(entry["name"])
        if kinds:
            message = undeclared_warning(entry["name"], kinds)
            entry.setdefault("warnings", []).append({"code": "undeclared-capability", "message": message})
            said.append(message)
    return said
