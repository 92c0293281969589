"""`mcp.lock`: the reviewed definitions of every advertised connection's tools, resources, resource
templates and prompts, by digest, and the comparison of a live listing against it (`drifts`).

A definition's digest is the SHA-256 (hex) of its RFC 8785 (JCS) canonical JSON: key order and
whitespace never matter, while every character of every string does (no Unicode normalisation: a
description that differs only in NFC/NFD or an invisible character is a change). `_meta` takes part
minus the keys that describe one request or response rather than the item (`VOLATILE_META`).

The file is JSON written sorted with two-space indents, so a review reads it and git diffs it:

    {"version": 1,
     "connections": {"<name>": {"acceptNewTools": false, "tools": {"<tool>": "<digest>"}, "resources": {...},
                                "resourceTemplates": {...}, "prompts": {...}}},
     "definitions": {"<digest>": {<the canonical definition>}}}

`definitions` keeps each pinned definition in full, keyed by its own digest: `pin --show` prints it and
`pin --update` diffs against it. It is written and read with the rest in one atomic replace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import rfc8785

from ._diagnostics import Diagnostic

__all__ = [
    "KEY_FIELDS",
    "LOCK_FILE",
    "PIN_KINDS",
    "VOLATILE_META",
    "Drift",
    "Lock",
    "PinKind",
    "PinnedConnection",
    "canonical_definition",
    "digest_of",
    "drifts",
    "read_lock",
    "write_lock",
]

LOCK_FILE = "mcp.lock"
LOCK_VERSION = 1
PinKind = Literal["tools", "resources", "resourceTemplates", "prompts"]
PIN_KINDS: tuple[PinKind, ...] = ("tools", "resources", "resourceTemplates", "prompts")
KEY_FIELDS: dict[PinKind, str] = {
    "tools": "name",
    "resources": "uri",
    "resourceTemplates": "uriTemplate",
    "prompts": "name",
}
"""The field that names an item of each kind (what the lock is keyed by)."""
_SINGULAR: dict[PinKind, str] = {
    "tools": "tool",
    "resources": "resource",
    "resourceTemplates": "resource template",
    "prompts": "prompt",
}
VOLATILE_META = frozenset(
    {"progressToken", "io.modelcontextprotocol/related-task", "io.modelcontextprotocol/subscriptionId"}
)
"""`_meta` keys that belong to one request or response (a progress token, the task or subscription an
answer belongs to), not to what the item is: left out of its digest. Every other key counts, including
the rest of `io.modelcontextprotocol/` (an MCP Apps `ui` resource is part of what a tool does)."""
_DIGEST = re.compile(r"[0-9a-f]{64}")


def canonical_definition(item: Any) -> dict[str, Any]:
    """`item` (an `mcp_types` model or its JSON) as the JSON its digest covers: every field the upstream
    sent, `_meta` without `VOLATILE_META` (and without `_meta` when nothing else is left)."""
    data: dict[str, Any] = (
        dict(item) if isinstance(item, Mapping) else item.model_dump(mode="json", by_alias=True, exclude_none=True)
    )
    meta = data.get("_meta")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if k not in VOLATILE_META}
        data.pop("_meta")
        if kept:
            data["_meta"] = kept
    return data


def digest_of(definition: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of `definition`'s RFC 8785 canonical form."""
    return hashlib.sha256(rfc8785.dumps(definition)).hexdigest()


@dataclass(frozen=True, slots=True)
class PinnedConnection:
    """One connection's entry in the lock: item name -> digest per kind, and whether new tools are let in."""

    items: Mapping[PinKind, Mapping[str, str]]
    accept_new_tools: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"acceptNewTools": self.accept_new_tools}
        for kind in PIN_KINDS:
            out[kind] = dict(sorted(self.items.get(kind, {}).items()))
        return out


@dataclass(frozen=True, slots=True)
class Lock:
    """A read (or about to be written) `mcp.lock`."""

    connections: Mapping[str, PinnedConnection]
    definitions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict[str, Mapping[str, Any]])
    """digest -> the canonical definition it is the digest of."""

    def text(self) -> str:
        """The file's contents: sorted, two-space indents, non-ASCII kept as written, a final newline."""
        used = {d for c in self.connections.values() for kind in c.items.values() for d in kind.values()}
        doc = {
            "version": LOCK_VERSION,
            "connections": {name: self.connections[name].to_json() for name in sorted(self.connections)},
            "definitions": {d: self.definitions[d] for d in sorted(used) if d in self.definitions},
        }
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_lock(path: Path, lock: Lock) -> None:
    """Replace `path` with `lock` atomically (a temporary file in the same folder, then `os.replace`):
    a reader sees the old file or the new one, never half of one. Raises `OSError`."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(lock.text())
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # reviewed and committed: not a secret
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_lock(path: Path, known: Iterable[str] | None = None) -> tuple[Lock | None, list[Diagnostic]]:
    """Parse `path`. Returns the lock (None when it cannot be used at all) and a diagnostic, with its line,
    for each problem: JSON that does not parse, a wrong shape, a connection not in `known` (when given),
    a digest that is not 64 hex digits, a kept definition whose digest does not match it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [_diag(path, None, f"cannot read {path.name} ({type(exc).__name__}); run agent-sdk pin")]
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [_diag(path, exc.lineno, f"{path.name} is not valid JSON ({exc.msg}); run agent-sdk pin")]
    lines = text.splitlines()
    problems: list[Diagnostic] = []
    shaped = isinstance(doc, dict) and doc.get("version") == LOCK_VERSION
    if not shaped or not isinstance(doc.get("connections"), dict):
        shape = '{"version": 1, "connections": {...}}'
        return None, [_diag(path, 1, f"{path.name} must be {shape}; run agent-sdk pin")]
    raw_defs: Any = doc.get("definitions", {})
    definitions: dict[str, Mapping[str, Any]] = {}
    if isinstance(raw_defs, dict):
        for key, value in raw_defs.items():
            if isinstance(value, dict) and digest_of(value) == key:
                definitions[key] = value
            else:
                where = _line_of(lines, f'"{key}": {{', 0)
                problems.append(
                    _diag(path, where, f"definition {str(key)[:16]}... does not match its digest (edited by hand?)")
                )
    known_set = set(known) if known is not None else None
    connections: dict[str, PinnedConnection] = {}
    for name, entry in doc["connections"].items():
        start = _line_of(lines, f'"{name}": {{', 0)
        if known_set is not None and name not in known_set:
            problems.append(
                _diag(
                    path,
                    start,
                    f"connection {name!r} is not a pinned connection of this project (not defined, not "
                    "advertise_tools, or pin=False); run agent-sdk pin --update to drop it",
                )
            )
            continue
        if not isinstance(entry, dict):
            problems.append(_diag(path, start, f"connection {name!r} must be an object of tools, resources, prompts"))
            continue
        parsed = _entry(path, lines, start or 0, str(name), entry, problems)
        if parsed is not None:
            connections[str(name)] = parsed
    return Lock(connections, definitions), problems


def _entry(
    path: Path, lines: list[str], start: int, name: str, entry: dict[str, Any], problems: list[Diagnostic]
) -> PinnedConnection | None:
    accept = entry.get("acceptNewTools", False)
    if not isinstance(accept, bool):
        problems.append(_diag(path, _line_of(lines, '"acceptNewTools"', start), "acceptNewTools must be true or false"))
        return None
    items: dict[PinKind, dict[str, str]] = {}
    ok = True
    for kind in PIN_KINDS:
        raw: Any = entry.get(kind, {})
        if not isinstance(raw, dict):
            problems.append(_diag(path, _line_of(lines, f'"{kind}"', start), f"{kind} must map names to digests"))
            ok = False
            continue
        items[kind] = {}
        for item, value in raw.items():
            if not isinstance(value, str) or not _DIGEST.fullmatch(value):
                shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
                problems.append(
                    _diag(
                        path,
                        _line_of(lines, json.dumps(item, ensure_ascii=False) + ":", start),
                        f"{_SINGULAR[kind]} {item!r} of connection {name!r}: a digest is 64 hex digits "
                        f"(SHA-256), this one is {shown}; run agent-sdk pin --update {name}",
                    )
                )
                ok = False
                continue
            items[kind][str(item)] = value
    return PinnedConnection(items, accept) if ok else None


def _line_of(lines: list[str], needle: str, start: int) -> int | None:
    """The 1-based line at or after `start` (1-based) holding `needle`: where a diagnostic points."""
    for number in range(max(start, 1), len(lines) + 1):
        if needle in lines[number - 1]:
            return number
    return start or None


def _diag(path: Path, line: int | None, message: str) -> Diagnostic:
    return Diagnostic(path, line, "error", message, "bad-lock")


@dataclass(frozen=True, slots=True)
class Drift:
    """One difference between a connection's live listing and its entry in the lock."""

    connection: str
    kind: PinKind
    name: str
    change: Literal["changed", "new", "removed", "renamed", "unpinned"]
    """`unpinned`: the connection has no entry in the lock at all (every item of it is new)."""
    old: str | None = None
    new: str | None = None
    fields: tuple[str, ...] = ()
    """For `changed`: the top-level fields that differ (`description`, `inputSchema`, ...)."""
    renamed_from: str | None = None
    before: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    after: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    principal: str | None = None
    """For a `grants="per_principal"` connection: whose listing this is (the fix pins from it)."""

    @property
    def held_back(self) -> bool:
        """Whether the live item is kept from peers and turns (everything but a removal)."""
        return self.change != "removed"

    def sentence(self, *, full: bool = False) -> str:
        """What changed, in one sentence naming the item and its connection, with the old and new digests
        (12 digits unless `full`)."""
        whose = f" (in the listing of {self.principal})" if self.principal is not None else ""
        return f"{_SINGULAR[self.kind]} {self.name!r} of connection {self.connection!r}{whose} {self.detail(full=full)}"

    def detail(self, *, full: bool = False) -> str:
        """`sentence` without the item and connection (for a problem that names them already)."""

        def short(d: str | None) -> str:
            return "none" if d is None else d if full else d[:12]

        fix = f"review it with agent-sdk pin --update {self.connection}"
        if self.principal is not None:
            fix += f" --principal {self.principal}"
        if self.change == "changed":
            fields = ", ".join(self.fields) or "the pinned definition is not kept in mcp.lock"
            return f"changed ({fields}): {short(self.old)} -> {short(self.new)}; {fix}"
        if self.change == "renamed":
            return f"is {self.renamed_from!r} renamed ({short(self.old)} -> {short(self.new)}); {fix}"
        if self.change == "new":
            return f"is new, not in mcp.lock ({short(self.new)}); {fix}"
        if self.change == "unpinned":
            return f"is not pinned: the connection is not in mcp.lock ({short(self.new)}); {fix}"
        return f"was removed upstream (pinned {short(self.old)}); {fix}"


def drifts(
    connection: str,
    kind: PinKind,
    pinned: PinnedConnection | None,
    current: Mapping[str, Mapping[str, Any]],
    definitions: Mapping[str, Mapping[str, Any]],
) -> list[Drift]:
    """How `current` (item name -> canonical definition) differs from the lock's entry, sorted by name.

    A new item whose definition equals a removed one's but for its name is one `renamed` drift. With
    `acceptNewTools`, a new tool is no drift (a renamed one still is)."""
    if pinned is None:
        return [
            Drift(connection, kind, name, "unpinned", new=digest_of(d), after=d) for name, d in sorted(current.items())
        ]
    locked = pinned.items.get(kind, {})
    key = KEY_FIELDS[kind]
    out: list[Drift] = []
    removed = {name: digest for name, digest in locked.items() if name not in current}
    unnamed = {name: _without(definitions.get(d), key) for name, d in removed.items()}
    for name, definition in sorted(current.items()):
        digest = digest_of(definition)
        old = locked.get(name)
        if old == digest:
            continue
        if old is not None:
            before = definitions.get(old)
            fields = _changed_fields(before, definition) if before is not None else ()
            out.append(Drift(connection, kind, name, "changed", old, digest, fields, before=before, after=definition))
            continue
        twin = next((r for r, d in unnamed.items() if d is not None and d == _without(definition, key)), None)
        if twin is not None:
            del unnamed[twin]
            old = removed.pop(twin)
            before = definitions.get(old)
            out.append(Drift(connection, kind, name, "renamed", old, digest, (key,), twin, before, definition))
            continue
        if kind == "tools" and pinned.accept_new_tools:
            continue
        out.append(Drift(connection, kind, name, "new", None, digest, after=definition))
    for name, digest in sorted(removed.items()):
        out.append(Drift(connection, kind, name, "removed", digest, None, before=definitions.get(digest)))
    return sorted(out, key=lambda d: d.name)


def _without(definition: Mapping[str, Any] | None, key: str) -> dict[str, Any] | None:
    return None if definition is None else {k: v for k, v in definition.items() if k != key}


def _changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(k for k in set(before) | set(after) if before.get(k, _ABSENT) != after.get(k, _ABSENT)))


_ABSENT = object()
