"""`define_server`: a curated server, a named view over the tools, resources and prompts of any connections.

A curated server is a file `agent/servers/<name>.py` holding one `define_server(...)`. It copies nothing:
each selector picks real tools (by connection, by name or glob, by annotation) and may give one a new name,
title or description, fix arguments (`set`) and hide fixed ones from the peer's schema (`hide`). The
gateway serves it at `/v1/mcp/servers/<name>` and over `serve --stdio --server <name>`
(docs/curated-servers.md); everything that decides a call sees the real tool.

Like `define_connection`, `define_server` never raises: each problem is recorded with the element it is
about (`Problem.where`, e.g. `tools[2]`), and the loader turns it into a diagnostic at that element's line.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ._names import NAME_RULE, is_valid_tool_name
from ._problems import Problem

__all__ = ["CuratedServer", "Selector", "define_server", "element_lines", "loaded_server", "unmatched"]

_SELECTOR_FIELDS = ("connection", "name", "annotation", "rename", "title", "description", "set", "hide")
_ITEM_FIELDS = ("connection", "name")
_SERVER_FIELDS = ("title", "version", "instructions", "tools", "resources", "prompts", "discovery", "always_visible")


@dataclass(frozen=True, slots=True)
class Selector:
    """One entry of a curated server's `tools` (or `resources`, `prompts`): what it picks and how it shows it."""

    where: str
    """Where it is in the file (`tools[0]`), for diagnostics."""
    connection: str | None = None
    name: str | None = None
    """A name or an `fnmatch` glob (a resource's URI, a prompt's name)."""
    annotation: str | None = None
    """A tool annotation that must be true (`readOnlyHint`)."""
    rename: str | None = None
    title: str | None = None
    description: str | None = None
    fixed: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """`set`: arguments whose value the gateway sets, whatever the peer sends."""
    hidden: tuple[str, ...] = ()
    """`hide`: fixed arguments the peer's schema no longer shows."""

    def picks(self, connection: str | None, name: str, annotations: Mapping[str, Any] | None = None) -> bool:
        if self.connection is not None and connection != self.connection:
            return False
        if self.name is not None and not fnmatch.fnmatchcase(name, self.name):
            return False
        return self.annotation is None or (annotations or {}).get(self.annotation) is True

    @property
    def exact(self) -> bool:
        """Names one tool (no glob): the selector a rename needs and `validate --online` checks."""
        return self.name is not None and not any(c in self.name for c in "*?[")


@dataclass(frozen=True, slots=True)
class CuratedServer:
    """A loaded `define_server(...)`: `name` is its file's stem."""

    name: str = ""
    title: str | None = None
    version: str | None = None
    instructions: str | None = None
    tools: tuple[Selector, ...] = ()
    resources: tuple[Selector, ...] = ()
    prompts: tuple[Selector, ...] = ()
    source: Path | None = None
    line: int | None = None
    problems: tuple[Problem, ...] = ()
    discovery: bool = False
    """Served in discovery mode (docs/discovery.md): its `tools/list` is the meta-tools and `always_visible`."""
    always_visible: tuple[str, ...] = ()
    """Names or globs of its (shown) tools listed beside the meta-tools in discovery mode."""

    def named(self, name: str, source: Path) -> CuratedServer:
        return replace(self, name=name, source=source)


def define_server(
    *,
    title: str | None = None,
    version: str | None = None,
    instructions: str | None = None,
    tools: Sequence[Mapping[str, Any]] = (),
    resources: Sequence[Mapping[str, Any]] = (),
    prompts: Sequence[Mapping[str, Any]] = (),
    discovery: bool = False,
    always_visible: Sequence[str] = (),
    **unknown: Any,
) -> CuratedServer:
    """A curated server (docs/curated-servers.md). Each entry of `tools` is a dict of `connection`,
    `name` (a name or glob), `annotation` (e.g. `"readOnlyHint"`), and for one named tool `rename`,
    `title`, `description`, `set` ({argument: value}) and `hide` ([argument, ...], each also in `set`).
    `resources` and `prompts` take `connection` and `name` (a URI or prompt name, or a glob). With
    `discovery=True` it is served in discovery mode, listing the tools `always_visible` names beside the meta-tools.
    Never raises: problems are reported by `agent-sdk validate`."""
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]  # the definition file's call site
    problems: list[Problem] = []
    for key in unknown:
        problems.append(
            Problem("unknown-field", f"unknown field {key!r} in define_server(...); the fields are {_SERVER_FIELDS}")
        )
    texts: tuple[tuple[str, object], ...] = (("title", title), ("version", version), ("instructions", instructions))
    for label, value in texts:
        if value is not None and type(value) is not str:
            problems.append(Problem("bad-value", f"{label} must be a string, not {type(value).__name__}"))
    if type(discovery) is not bool:
        problems.append(Problem("bad-value", f"discovery must be True or False, not {type(discovery).__name__}"))
    pins: tuple[Any, ...] = tuple(always_visible) if isinstance(always_visible, list | tuple) else ()
    if not isinstance(always_visible, list | tuple) or not all(isinstance(p, str) and p for p in pins):
        problems.append(Problem("bad-value", "always_visible must be a list of tool names or globs (strings)"))
    picked = _selectors("tools", tools, _SELECTOR_FIELDS, problems)
    _check_renames(picked, problems)
    return CuratedServer(
        title=title if isinstance(title, str) else None,
        version=version if isinstance(version, str) else None,
        instructions=instructions if isinstance(instructions, str) else None,
        tools=picked,
        resources=_selectors("resources", resources, _ITEM_FIELDS, problems),
        prompts=_selectors("prompts", prompts, _ITEM_FIELDS, problems),
        source=Path(frame.f_code.co_filename),
        line=frame.f_lineno,
        problems=tuple(problems),
        discovery=discovery is True,
        always_visible=tuple(p for p in pins if isinstance(p, str)),
    )


def _selectors(label: str, entries: object, known: tuple[str, ...], problems: list[Problem]) -> tuple[Selector, ...]:
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
        problems.append(Problem("bad-value", f"{label} must be a list of dicts such as [{{'connection': 'files'}}]"))
        return ()
    out: list[Selector] = []
    for i, entry in enumerate(entries):
        where = f"{label}[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(_at(where, "bad-value", f"{where} must be a dict such as {{'connection': 'files'}}"))
            continue
        entry_map: Mapping[str, Any] = entry
        selector = _selector(where, entry_map, known, problems)
        if selector is not None:
            out.append(selector)
    return tuple(out)


def _selector(where: str, entry: Mapping[str, Any], known: tuple[str, ...], problems: list[Problem]) -> Selector | None:
    before = len(problems)
    for key in entry:
        if key not in known:
            problems.append(_at(where, "unknown-field", f"{where}: unknown field {key!r}; the fields are {known}"))
    strings = {k: entry.get(k) for k in ("connection", "name", "annotation", "rename", "title", "description")}
    for key, value in strings.items():
        if value is not None and (not isinstance(value, str) or not value):
            problems.append(_at(where, "bad-value", f"{where}: {key} must be a non-empty string"))
    if not any(strings[k] for k in ("connection", "name", "annotation")):
        problems.append(
            _at(where, "bad-selector", f"{where} picks nothing: give a connection, a name or an annotation")
        )
    fixed = entry.get("set", {})
    if not isinstance(fixed, Mapping) or not all(isinstance(k, str) for k in fixed):
        problems.append(_at(where, "bad-value", f"{where}: set must be a dict of argument name to value"))
        fixed = {}
    hidden = entry.get("hide", ())
    if isinstance(hidden, str) or not isinstance(hidden, Sequence) or not all(isinstance(h, str) for h in hidden):
        problems.append(_at(where, "bad-value", f"{where}: hide must be a list of argument names"))
        hidden = ()
    for arg in hidden:
        if arg not in fixed:
            problems.append(
                _at(
                    where,
                    "hidden-without-value",
                    f"{where}: argument {arg!r} is hidden without a value; the upstream would never receive one: "
                    f"add it to set={{{arg!r}: ...}} or stop hiding it",
                )
            )
    selector = Selector(
        where, strings["connection"], strings["name"], strings["annotation"], strings["rename"], strings["title"],
        strings["description"], dict(fixed), tuple(hidden),
    )  # fmt: skip
    if len(problems) > before:
        return None
    changes = selector.rename or selector.title or selector.description or selector.fixed
    if changes and not selector.exact:
        problems.append(
            _at(
                where,
                "bad-selector",
                f"{where} renames, retitles, describes or sets arguments of every tool its name matches; "
                "name one tool (no glob) to change it",
            )
        )
        return None
    if selector.rename is not None and not is_valid_tool_name(selector.rename):
        problems.append(
            _at(where, "bad-name", f"{where}: rename {selector.rename!r} breaks the tool-name rule {NAME_RULE}")
        )
        return None
    return selector


def _check_renames(selectors: tuple[Selector, ...], problems: list[Problem]) -> None:
    """Two entries that give their tools the same name: the peer could reach only one."""
    seen: dict[str, Selector] = {}
    for s in selectors:
        shown = s.rename or (s.name if s.exact else None)
        if shown is None:
            continue
        first = seen.setdefault(shown, s)
        if first is not s and (s.rename or first.rename):
            problems.append(
                _at(
                    s.where,
                    "rename-collision",
                    f"{s.where} names its tool {shown!r}, which {first.where} already names; rename one of them",
                )
            )


def _at(where: str, code: str, message: str) -> Problem:
    return Problem(code, message, where=where)


def element_lines(path: Path, call_line: int | None) -> dict[str, int]:
    """`{"tools[2]": line, ...}`: where each entry of the `define_server(...)` call at `call_line` is in
    `path` (the call's own line for an entry written elsewhere, e.g. a variable)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    lines: dict[str, int] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (node.lineno <= (call_line or 0) <= (node.end_lineno or 0)):
            continue
        for kw in node.keywords:
            if kw.arg in ("tools", "resources", "prompts") and isinstance(kw.value, ast.List | ast.Tuple):
                for i, element in enumerate(kw.value.elts):
                    lines[f"{kw.arg}[{i}]"] = element.lineno
    return lines


class _Listed(Protocol):
    """A listed tool, as far as a selector looks at it (a `TurnTool`)."""

    @property
    def name(self) -> str: ...
    @property
    def connection(self) -> str | None: ...
    @property
    def annotations(self) -> Mapping[str, Any] | None: ...


def unmatched(server: CuratedServer, tools: Iterable[_Listed], unlisted: Iterable[str] = ()) -> list[Selector]:
    """The entries of `server.tools` that pick none of `tools` (a listing), leaving out those whose
    connection is in `unlisted` (it could not be listed: nothing is known of its tools)."""
    listed = list(tools)
    skipped = set(unlisted)
    return [
        s
        for s in server.tools
        if s.connection not in skipped and not any(s.picks(t.connection, t.name, t.annotations) for t in listed)
    ]


def loaded_server(
    values: Iterable[object], path: Path, defined: Mapping[str, object]
) -> tuple[CuratedServer | None, list[tuple[int | None, Problem]]]:
    """The curated server among a definition file's module-level `values` (named after `path`) when it has
    no error, and every problem with its line; `defined`: the project's connections, by name."""
    found = [v for v in values if isinstance(v, CuratedServer)]
    if len(found) != 1:
        message = (
            f"defines {len(found)} curated servers; a file in servers/ defines exactly one: "
            "`server = define_server(...)` (from connections import define_server)"
        )
        return None, [(None, Problem("no-definition" if not found else "many-definitions", message))]
    server = found[0]
    line = server.line if server.source == path else None
    unknown = [
        Problem(
            "unknown-connection",
            f"{s.where} picks from connection {s.connection!r}, which this project does not define; "
            f"the connections are {sorted(defined)}",
            where=s.where,
        )
        for s in (*server.tools, *server.resources, *server.prompts)
        if s.connection is not None and s.connection not in defined
    ]
    problems = [*server.problems, *unknown]
    lines = element_lines(path, line) if problems else {}
    placed = [(lines.get(p.where or "", line), p) for p in problems]
    ok = not any(p.severity == "error" for p in problems)
    return (server.named(path.stem, path) if ok else None), placed
