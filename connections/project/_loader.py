"""Walk an agent project and load its connections, tools and extension contributions.

Each definition file is imported on its own; whatever goes wrong in one file becomes a
diagnostic naming that file (and line), and loading goes on, so one run reports everything.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Literal

from .._exceptions import ProjectError
from ._definitions import ConnectionDefinition
from ._diagnostics import Diagnostic
from ._mcpjson import load_mcp_json
from ._names import NAME_RULE, check_name, is_valid_tool_name
from ._pin_guard import pinnable
from ._pins import LOCK_FILE, read_lock
from ._problems import Problem
from ._sandbox import Sandbox, project_sandbox_default
from ._servers import CuratedServer, loaded_server
from ._tools import ServerTool
from ._validation import connection_problems

__all__ = ["Extension", "Project", "load_project"]

Slot = Literal["mcp-connections", "host-connections", "tools"]
_SLOTS: tuple[Slot, ...] = ("mcp-connections", "host-connections", "tools")
RESERVED_TOOL_NAMES = frozenset({"mcp_list_tools", "mcp_call_tool"})
"""The attached-connection meta-tools; no authored tool may take these names."""


@dataclass(slots=True)
class Extension:
    """A mounted extension folder `agent/extensions/<namespace>/` and what it contributed."""

    namespace: str
    path: Path
    tools: list[str] = field(default_factory=list[str])
    connections: list[str] = field(default_factory=list[str])


@dataclass(slots=True)
class Project:
    """A loaded agent project. `connections` and `tools` hold only definitions without errors."""

    root: Path
    connections: dict[str, ConnectionDefinition] = field(default_factory=dict[str, ConnectionDefinition])
    tools: dict[str, ServerTool] = field(default_factory=dict[str, ServerTool])
    extensions: dict[str, Extension] = field(default_factory=dict[str, Extension])
    diagnostics: list[Diagnostic] = field(default_factory=list[Diagnostic])
    servers: dict[str, CuratedServer] = field(default_factory=dict[str, CuratedServer])
    """Curated servers (`agent/servers/<name>.py`, docs/curated-servers.md), those without errors."""

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    @property
    def ok(self) -> bool:
        """No error-severity diagnostics: `serve` may start."""
        return not self.errors


def load_project(root: Path | str) -> Project:
    """Load the agent project at `root` (the folder holding `agent/` and an optional `mcp.json`).

    Raises `ProjectError` only when `root` is not a folder; every other problem is a diagnostic.
    """
    root = Path(root).expanduser().resolve()
    if not root.is_dir():
        raise ProjectError(f"project folder {str(root)!r} does not exist; pass --dir with your agent project")
    project = _Loading(root)
    project.run()
    return project.project


class _Loading:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.agent = root / "agent"
        self.project = Project(root=root)
        self.conn_sources: dict[str, Path] = {}
        self.tool_sources: dict[str, Path] = {}
        self.tag = hashlib.sha1(str(root).encode()).hexdigest()[:10]
        self.sandbox_default, sandbox_diags = project_sandbox_default(root)
        self.project.diagnostics.extend(sandbox_diags)

    def diag(self, path: Path, line: int | None, message: str, code: str, severity: str = "error") -> None:
        self.project.diagnostics.append(Diagnostic(path, line, severity, message, code))  # type: ignore[arg-type]

    def run(self) -> None:
        mcp_json = self.root / "mcp.json"
        if not self.agent.is_dir() and not mcp_json.exists():
            self.diag(
                self.root,
                None,
                "no agent/ folder and no mcp.json here; is --dir pointing at your agent project?",
                "empty-project",
                "warning",
            )
        # agent/lib/ is import-only shared code: definition files may `import lib.x`.
        sys.path.insert(0, str(self.agent))
        try:
            for slot in _SLOTS:
                for path in self._files(self.agent / slot):
                    self._load_file(path, slot, namespace=None)
            self._load_extensions()
            for path in self._files(self.agent / "servers"):
                self._load_server(path)
        finally:
            sys.path.remove(str(self.agent))
            for mod in [m for m in sys.modules if m == "lib" or m.startswith("lib.")]:
                del sys.modules[mod]
        if mcp_json.exists():
            defns, diags = load_mcp_json(mcp_json)
            self.project.diagnostics.extend(diags)
            for defn in defns:
                self._add_connection(defn, mcp_json, in_host_folder=False)
        if (self.root / LOCK_FILE).exists():
            # A connection that failed to load is still "defined": its own error says what is wrong.
            loaded = self.project.connections
            known = [n for n in self.conn_sources if n not in loaded or pinnable(loaded[n])]
            lock, problems = read_lock(self.root / LOCK_FILE, known)
            self.project.diagnostics.extend(problems)
            if lock is not None:
                self._unpinned(lock.connections)

    def _unpinned(self, locked: Mapping[str, object]) -> None:
        """A warning for each pinned connection the lock does not name: `serve` holds back every tool it lists
        (`pin_unpinned`) until `agent-sdk pin --update NAME` records them, so a project that says 0 errors
        must still say why those tools are missing."""
        for name, defn in sorted(self.project.connections.items()):
            if name in locked or not pinnable(defn):
                continue
            self.diag(
                self.conn_sources.get(name, self.root / LOCK_FILE),
                defn.line if defn.source == self.conn_sources.get(name) else None,
                f"connection {name!r} is not in {LOCK_FILE}: serve holds back every tool it lists until you review "
                f"them with agent-sdk pin --update {name} (or set pin=False)",
                "unpinned-connection",
                "warning",
            )

    def _files(self, folder: Path) -> Iterator[Path]:
        if not folder.is_dir():
            return
        for path in sorted(folder.iterdir()):
            if path.name in ("__init__.py", "__pycache__") or path.name.startswith("."):
                continue
            if path.is_dir() or path.suffix != ".py":
                self.diag(
                    path,
                    None,
                    f"ignored: only <name>.py files are definitions in {folder.name}/; move it to agent/lib/",
                    "stray-file",
                    "warning",
                )
                continue
            yield path

    def _load_extensions(self) -> None:
        ext_root = self.agent / "extensions"
        if not ext_root.is_dir():
            return
        for folder in sorted(ext_root.iterdir()):
            if folder.name.startswith(".") or folder.name == "__pycache__":
                continue
            if not folder.is_dir():
                self.diag(
                    folder,
                    None,
                    "ignored: an extension is mounted as a folder agent/extensions/<namespace>/ "
                    "holding tools/, mcp-connections/ or host-connections/",
                    "stray-file",
                    "warning",
                )
                continue
            if (why := check_name(folder.name, "extension namespace", "rename the folder")) is not None:
                self.diag(folder, None, why, "bad-name")
                continue
            self.project.extensions[folder.name] = Extension(folder.name, folder)
            for slot in _SLOTS:
                for path in self._files(folder / slot):
                    self._load_file(path, slot, namespace=folder.name)

    def _import(self, path: Path, slot: str) -> ModuleType | None:
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
        mod_name = f"_agent_sdk_project_{self.tag}_{slot.replace('-', '_')}_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            self.diag(path, None, "cannot be imported as a Python file", "import-error")
            return None
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            # A definition file that prints must not corrupt `info --json` on stdout.
            with contextlib.redirect_stdout(sys.stderr):
                spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            sys.modules.pop(mod_name, None)
            line = _line_in(exc, path)
            text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
            detail = text.strip().splitlines()[0] if text.strip() else ""
            detail = f": {detail[:200]}" if detail else ""
            self.diag(
                path,
                line,
                # This interpreter, not a bare `python`: only one that has agent-sdk installed can import the file.
                f"importing this file raised {type(exc).__name__}{detail}; fix it (run `{sys.executable} {path.name}` "
                "in its folder to see the traceback)",
                "import-error",
            )
            return None
        return module

    def _load_file(self, path: Path, slot: Slot, namespace: str | None) -> None:
        base = path.stem
        what = "tool" if slot == "tools" else "connection"
        if (why := check_name(base, what)) is not None:
            self.diag(path, None, why, "bad-name")
            return
        name = f"{namespace}__{base}" if namespace else base
        if not is_valid_tool_name(name):
            # Each part may pass the rule while the mounted name is too long for it.
            self.diag(
                path,
                None,
                f"{what} name {name!r} is {len(name)} characters; the tool-name rule {NAME_RULE} allows 64: "
                "shorten the file name or the extension folder",
                "bad-name",
            )
            return
        if slot == "tools" and name in RESERVED_TOOL_NAMES:
            self.diag(path, None, f"tool name {name!r} is reserved for the attached-connection meta-tools", "bad-name")
            return
        module = self._import(path, slot)
        if module is None:
            return
        wanted: type = ServerTool if slot == "tools" else ConnectionDefinition
        other: type = ConnectionDefinition if slot == "tools" else ServerTool
        found = _unique(v for v in vars(module).values() if isinstance(v, wanted))
        if not found:
            if any(isinstance(v, other) for v in vars(module).values()):
                wrong = "a connection" if slot == "tools" else "a tool"
                self.diag(path, None, f"defines {wrong}, but files in {slot}/ define a {what}; move it", "wrong-slot")
            else:
                maker = "define_tool" if slot == "tools" else "define_connection"
                self.diag(
                    path,
                    None,
                    f"defines no {what}: add a module-level `{what} = {maker}(...)` (from connections import {maker})",
                    "no-definition",
                )
            return
        if len(found) > 1:
            self.diag(
                path,
                None,
                f"defines {len(found)} {what}s; one file defines exactly one (split it: the file name is the name)",
                "many-definitions",
            )
            return
        obj = found[0]
        if slot == "tools":
            assert isinstance(obj, ServerTool)
            self._add_tool(obj, path, name, namespace)
        else:
            assert isinstance(obj, ConnectionDefinition)
            in_host = slot == "host-connections"
            line = obj.line if obj.source == path else None
            defn = obj.named(name, path, line=line, host_only=obj.host_only or in_host)
            self._add_connection(defn, path, in_host_folder=in_host, namespace=namespace)

    def _load_server(self, path: Path) -> None:
        if (why := check_name(path.stem, "curated server")) is not None:
            self.diag(path, None, why, "bad-name")
            return
        module = self._import(path, "servers")
        if module is None:
            return
        server, problems = loaded_server(_unique(iter(vars(module).values())), path, self.conn_sources)
        for line, p in problems:
            self.diag(path, line, p.message, p.code, p.severity)
        if server is not None:
            self.project.servers[path.stem] = server

    def _report(self, path: Path, line: int | None, problems: tuple[Problem, ...] | list[Problem]) -> bool:
        for problem in problems:
            self.diag(path, line, problem.message, problem.code, problem.severity)
        return any(p.severity == "error" for p in problems)

    def _add_connection(
        self, defn: ConnectionDefinition, path: Path, *, in_host_folder: bool, namespace: str | None = None
    ) -> None:
        rules = list(connection_problems(defn, in_host_folder=in_host_folder))
        if path.suffix == ".json":  # one mcp.json holds many servers: say which one
            rules = [Problem(p.code, f"server {defn.name!r}: {p.message}", p.severity) for p in rules]
        problems = [*defn.problems, *rules]
        failed = self._report(path, defn.line, problems)
        if defn.name in self.conn_sources:
            first = self.conn_sources[defn.name]
            self.diag(
                path,
                defn.line,
                f"connection {defn.name!r} is defined twice: here and in {_rel(first, self.root)}; "
                "rename or remove one",
                "duplicate-name",
            )
            return
        self.conn_sources[defn.name] = path
        if namespace is not None:
            self.project.extensions[namespace].connections.append(defn.name)
        if not failed and defn.kind == "stdio":
            defn, failed = self._in_project_folder(defn, path)
        if not failed:
            self.project.connections[defn.name] = defn

    def _in_project_folder(self, defn: ConnectionDefinition, path: Path) -> tuple[ConnectionDefinition, bool]:
        """`defn` with its child's working directory resolved: the project folder, or its `cwd` (a relative
        one is relative to the project folder), never wherever the gateway was started from (a desktop client
        starts it in `/`). True as well when that folder does not exist (a diagnostic says so)."""
        cwd = (self.root / Path(defn.cwd or ".").expanduser()).resolve()
        if not cwd.is_dir():
            message = f"cwd {defn.cwd!r} is not a folder (resolved against the project folder: {str(cwd)!r})"
            if path.suffix == ".json":
                message = f"server {defn.name!r}: {message}"
            self.diag(path, defn.line, f"{message}; create it or fix cwd", "bad-cwd")
            return defn, True
        sandbox = Sandbox() if defn.sandbox is None and self.sandbox_default else defn.sandbox
        if isinstance(sandbox, Sandbox):
            sandbox, missing = self._granted(sandbox)
            for where in missing:
                message = f"sandbox grants {where!r}, which does not exist (resolved against the project folder)"
                if path.suffix == ".json":
                    message = f"server {defn.name!r}: {message}"
                self.diag(path, defn.line, f"{message}; create it or remove it from the grant", "bad-sandbox")
            if missing:
                return defn, True
        return replace(defn, cwd=str(cwd), sandbox=sandbox), False

    def _granted(self, sandbox: Sandbox) -> tuple[Sandbox, list[str]]:
        """`sandbox` with its paths absolute (a relative one is under the project folder), and those missing."""
        missing: list[str] = []

        def resolved(paths: tuple[str, ...]) -> tuple[str, ...]:
            out = tuple(str((self.root / Path(p).expanduser()).resolve()) for p in paths)
            missing.extend(p for p, r in zip(paths, out, strict=True) if not Path(r).exists())
            return out

        granted = replace(sandbox, writable=resolved(sandbox.writable), readable=resolved(sandbox.readable))
        hidden = tuple(str((self.root / Path(p).expanduser()).resolve()) for p in sandbox.hidden)  # may not exist yet
        return replace(granted, hidden=hidden), missing

    def _add_tool(self, tool: ServerTool, path: Path, name: str, namespace: str | None) -> None:
        line = tool.line if tool.source == path else None
        failed = self._report(path, line, tool.problems)
        if name in self.tool_sources:
            self.diag(path, line, f"tool {name!r} is defined twice; rename one", "duplicate-name")
            return
        self.tool_sources[name] = path
        if namespace is not None:
            self.project.extensions[namespace].tools.append(name)
        if not failed:
            self.project.tools[name] = tool.named(name, path)


def _unique(items: Iterator[object]) -> list[object]:
    seen: list[object] = []
    for item in items:
        if not any(item is s for s in seen):
            seen.append(item)
    return seen


def _line_in(exc: BaseException, path: Path) -> int | None:
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename) == path:
        return exc.lineno
    line: int | None = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename) == path:
            line = frame.lineno
    return line


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
