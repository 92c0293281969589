"""The Cedar entities of a decision: who calls (`AgentSdk::Principal`) and what it acts on.

Each entity is kept as its Cedar JSON text, built once per principal (and per token) and once per
target, so a decision joins two cached strings (`_decide.py`). The names follow the shipped schema
(`agent_sdk.cedarschema`, docs/policy.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cachetools import LRUCache

from connections import TurnTool
from connections.serving import canonical_uri

from ..auth.chain import Principal

__all__ = [
    "ANONYMOUS",
    "GATEWAY",
    "STDIO",
    "Target",
    "caller_of",
    "connection_target",
    "named_tool_target",
    "principal_json",
    "prompt_target",
    "resource_target",
    "tool_target",
]

STDIO = Principal("stdio", "loopback", "operator")
"""`serve --stdio`'s one caller: the local user who started it (`AgentSdk::Principal::"stdio"`)."""
ANONYMOUS = Principal("anonymous", "anonymous")


def caller_of(scope: Mapping[str, Any] | None) -> Principal:
    """The principal of a request: the auth chain's (anonymous where none ran); `STDIO` without an HTTP scope."""
    if scope is None:
        return STDIO
    principal = scope.get("state", {}).get("principal")
    return principal if isinstance(principal, Principal) else ANONYMOUS


@dataclass(frozen=True, slots=True)
class Target:
    """What an action is on: a Cedar entity type and id, and the entity as Cedar JSON."""

    type: str
    id: str
    entity: str

    @property
    def uid(self) -> dict[str, str]:
        return {"type": self.type, "id": self.id}


def _target(kind: str, ident: str, attrs: Mapping[str, Any] | None) -> Target:
    uid = {"type": f"AgentSdk::{kind}", "id": ident}
    entity = json.dumps({"uid": uid, "attrs": dict(attrs or {}), "parents": []}, separators=(",", ":"))
    return Target(uid["type"], ident, entity)


GATEWAY = _target("Gateway", "gateway", None)
"""The gateway itself: the resource of the listing and session-API actions."""

_TOOLS: LRUCache[tuple[str, str | None, str], Target] = LRUCache(maxsize=4096)


def _hint(annotations: Mapping[str, Any], key: str, default: bool) -> bool:
    value = annotations.get(key)
    return value if isinstance(value, bool) else default


_BY_TOOL: dict[int, tuple[TurnTool, Target]] = {}
_BY_TOOL_SIZE = 4096


def tool_target(tool: TurnTool) -> Target:
    """`AgentSdk::Tool::"<name>"` with its connection and annotation hints (MCP's defaults where unset), kept
    per tool object: a listed tool's target is made once, not once per call (its annotations' JSON key alone
    is a few µs)."""
    kept = _BY_TOOL.get(id(tool))
    if kept is not None and kept[0] is tool:  # the same tool, not a recycled `id()`
        return kept[1]
    target = named_tool_target(tool.name, tool.connection, tool.annotations)
    if len(_BY_TOOL) >= _BY_TOOL_SIZE:  # bounded: start again (a plain dict's lookup, not an LRU's, per call)
        _BY_TOOL.clear()
    _BY_TOOL[id(tool)] = (tool, target)
    return target


def named_tool_target(name: str, connection: str | None, annotations: Mapping[str, Any] | None) -> Target:
    """`tool_target` of a tool known by its parts (a connection's raw listing, a project's authored tool):
    `connection` None for an authored one."""
    annotations = annotations or {}
    key = (name, connection, json.dumps(annotations, sort_keys=True, default=str) if annotations else "")
    found = _TOOLS.get(key)
    if found is None:
        found = _target(
            "Tool",
            name,
            {
                "connection": connection or "",
                "authored": connection is None,
                "readOnly": _hint(annotations, "readOnlyHint", False),
                "destructive": _hint(annotations, "destructiveHint", True),
                "idempotent": _hint(annotations, "idempotentHint", False),
                "openWorld": _hint(annotations, "openWorldHint", True),
            },
        )
        _TOOLS[key] = found
    return found


def resource_target(uri: str, *, template: bool = False) -> Target:
    """`AgentSdk::Resource::"<uri>"` (a template by its URI template), in its canonical form (RFC 3986 §6.2.2,
    `connections/_uris.py`): every spelling of one resource is one entity."""
    uri = canonical_uri(uri, template=template)
    return _target("Resource", uri, {"uri": uri, "template": template})


def prompt_target(name: str) -> Target:
    return _target("Prompt", name, {"name": name})


def connection_target(name: str) -> Target:
    return _target("Connection", name, {"name": name})


_PRINCIPALS: LRUCache[tuple[str, str, str, int], tuple[object, str]] = LRUCache(maxsize=4096)


def principal_json(principal: Principal) -> str:
    """`AgentSdk::Principal::"<id>"` as Cedar JSON, built once per principal (an OAuth one once per token)."""
    key = (principal.id, principal.kind, principal.role, id(principal.oauth))
    found = _PRINCIPALS.get(key)
    if found is not None and found[0] is principal.oauth:  # the same token, not a recycled `id()`
        return found[1]
    text = _principal_entity(principal)
    _PRINCIPALS[key] = (principal.oauth, text)
    return text


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, str)]
    return []


def _principal_entity(principal: Principal) -> str:
    oauth = principal.oauth
    claims: Mapping[str, Any] = oauth.claims if oauth is not None else {}
    attrs = {
        "kind": principal.kind,
        "role": principal.role,
        "issuer": oauth.issuer if oauth is not None else "",
        "subject": oauth.subject if oauth is not None else "",
        "clientId": (oauth.client_id or "") if oauth is not None else "",
        "groups": sorted(set(_strings(claims.get("groups")))),
        "scopes": sorted(oauth.scopes) if oauth is not None else [],
    }
    # Selected claims: every top-level string claim, as a tag (a claim the schema lacks never fails a decision).
    tags = {k: v for k, v in claims.items() if isinstance(v, str)}
    uid = {"type": "AgentSdk::Principal", "id": principal.id}
    return json.dumps({"uid": uid, "attrs": attrs, "parents": [], "tags": tags}, separators=(",", ":"))
