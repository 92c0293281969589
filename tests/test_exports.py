"""Each package's public contract: a complete, isort-sorted `__all__`, and the one-way dependency rule.

`__all__` is sorted as ruff's RUF022 sorts it: SCREAMING_CASE, then CamelCase, then the rest, each
group in natural order. Complete means every public name the package namespace holds (what its
modules re-export) is listed, and every listed name exists.
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["connections", "connections.serving", "gateway", "gateway.commands", "oauth"]
OURS = ("connections", "gateway", "oauth")
FORBIDDEN = {"oauth": {"connections", "gateway"}, "connections": {"gateway"}}


def isort_key(name: str) -> tuple[int, list[object]]:
    if len(name) > 1 and name.isupper():
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    natural: list[object] = [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
    return group, natural


def test_isort_key_orders_like_ruff() -> None:
    # The order `ruff check --select RUF022 --fix` (ruff 0.17) gives these names.
    names = ["load", "Project", "NAME_RULE", "A2", "A10", "define_tool", "RESERVED", "T", "_x", "HTTPError"]
    ruff = ["A2", "A10", "NAME_RULE", "RESERVED", "HTTPError", "Project", "T", "_x", "define_tool", "load"]
    assert sorted(names, key=isort_key) == ruff


@pytest.mark.parametrize("package", PACKAGES)
def test_package_all_is_sorted(package: str) -> None:
    exported = list(importlib.import_module(package).__all__)
    assert exported == sorted(exported, key=isort_key)


def reexported(package: str) -> set[str]:
    """Public names the package's `__init__` binds from its own modules (or another of our packages)."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    names: set[str] = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] in OURS):
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name) and t.id != "__all__")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("package", PACKAGES)
def test_package_all_is_complete(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []
    # A re-exported submodule (`from . import project`) is a namespace, not part of the contract.
    public = {n for n in reexported(package) if not isinstance(getattr(module, n), types.ModuleType)}
    assert sorted(public - set(module.__all__)) == []
    assert sorted(set(module.__all__) - public) == []


def modules_of(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_every_module_all_is_sorted_and_names_what_it_defines(package: str) -> None:
    for path in modules_of(package):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
                assert names == sorted(names, key=isort_key), path
                module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                module = importlib.import_module(module_name)
                missing = [n for n in names if not hasattr(module, n)]
                assert not missing, f"{path}: __all__ names {missing} that the module does not define"


def imported_packages(path: Path, root: Path = ROOT) -> set[str]:
    """The top-level packages `path` imports, relative imports resolved against its own package."""
    tree = ast.parse(path.read_text(), str(path))
    here = list(path.relative_to(root).with_suffix("").parts)
    if here[-1] == "__init__":
        here = here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                found.add((node.module or "").split(".")[0])
            else:
                # `from ..x import y` in a/b/c.py (module a.b.c, package a.b) climbs level-1 packages from a.b.
                base = (
                    here[: len(here) - node.level] if path.name != "__init__.py" else here[: len(here) - node.level + 1]
                )
                target = [*base, *(node.module.split(".") if node.module else [])]
                found.add(target[0] if target else "")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_dependencies_point_one_way(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in modules_of(package)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_dependency_scan_sees_relative_imports_that_climb_out(tmp_path: Path) -> None:
    module = tmp_path / "oauth" / "_probe.py"
    module.parent.mkdir()
    module.write_text("from ..connections import load_project\nfrom . import _config\nimport gateway.cli\n")
    init = tmp_path / "oauth" / "sub" / "__init__.py"
    init.parent.mkdir()
    init.write_text("from ...gateway import main\nfrom .. import _config\n")
    assert imported_packages(module, tmp_path) == {"connections", "oauth", "gateway"}
    assert imported_packages(init, tmp_path) == {"gateway", "oauth"}


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imported_modules(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """The modules of ours that `path` imports anywhere in it (under `TYPE_CHECKING` and in functions too).

    `from pkg import name` names the module `pkg.name` when there is one, else the package `pkg`.
    """
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return found & known


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (or a module importing itself), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def package_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports. A package's `__init__` re-exporting its own
    modules is how a package is built, not a cycle, so edges into an `__init__` from inside it are left out."""
    paths = sorted((root / package).rglob("*.py"))
    known = {module_name(p, root) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        name = module_name(path, root)
        inits = {m for m in known if path.name != "__init__.py" and name.startswith(m + ".")}
        graph[name] = {m for m in imported_modules(path, known, root) if m != name and m not in inits}
    return graph


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_no_package_has_an_import_cycle_among_its_own_modules(package: str) -> None:
    assert cycles(package_graph(package)) == []


def test_the_cycle_scan_sees_a_cycle_through_type_checking_and_function_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from ._a import A\n")
    (pkg / "_a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\nA = 1\n")
    (pkg / "_b.py").write_text("def f():\n    from . import _c\n")
    (pkg / "_c.py").write_text("from pkg._a import A\n")
    (pkg / "_d.py").write_text("from . import _a\n")
    assert cycles(package_graph("pkg", tmp_path)) == [["pkg._a", "pkg._b", "pkg._c"]]


def folder_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Folder -> the other folders of the same package its modules import. A folder is a subpackage
    directly under the package (its own subfolders count as part of it); the package's root modules
    are the package itself, not a folder, and are left out."""
    top = root / package
    folders = {p.parent.name for p in top.glob("*/__init__.py")}
    known = {module_name(p, root) for p in top.rglob("*.py")}

    def folder_of(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in folders else None

    graph: dict[str, set[str]] = {folder: set() for folder in folders}
    for path in top.rglob("*.py"):
        here = folder_of(module_name(path, root))
        if here is None:
            continue
        for target in imported_modules(path, known, root):
            there = folder_of(target)
            if there is not None and there != here:
                graph[here].add(there)
    return graph


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_no_package_has_an_import_cycle_among_its_folders(package: str) -> None:
    assert cycles(folder_graph(package)) == []


def test_the_folder_scan_sees_a_cycle_between_two_folders(tmp_path: Path) -> None:
    for folder in ("pkg", "pkg/a", "pkg/b", "pkg/b/deep"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a" / "_x.py").write_text("from ..b.deep import _y\n")
    (tmp_path / "pkg" / "b" / "deep" / "_y.py").write_text("def f():\n    from pkg.a import _x\n")
    (tmp_path / "pkg" / "_root.py").write_text("from .a import _x\nfrom .b.deep import _y\n")
    assert folder_graph("pkg", tmp_path) == {"a": {"b"}, "b": {"a"}}
    assert cycles(folder_graph("pkg", tmp_path)) == [["a", "b"]]


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_no_folder_holds_more_than_25_modules(package: str) -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [ROOT / package, *(p.parent for p in (ROOT / package).rglob("*/__init__.py"))]
        if (count := len(list(folder.glob("*.py")))) > 25
    }
    assert crowded == {}


def test_the_author_api_stays_small() -> None:
    # `connections.__all__` is what a project's author uses and the exception tree; the gateway's
    # plumbing is `connections.serving`, not the author's contract.
    import connections

    # 52: `define_server` and its result `CuratedServer` (issue 43: curated servers are authored like connections).
    assert len(connections.__all__) <= 52, len(connections.__all__)
    roots = [n for n in connections.__all__ if isinstance(getattr(connections, n), type)]
    errors = [n for n in roots if issubclass(getattr(connections, n), BaseException)]
    assert [n for n in errors if not issubclass(getattr(connections, n), connections.ConnectionsError)] == []


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_the_mcp_types_have_one_spelling(package: str) -> None:
    # `mcp.types` re-exports `mcp_types`; one name for the same models keeps a reader from
    # wondering whether two modules mean different things.
    spelled = {
        str(path.relative_to(ROOT))
        for path in modules_of(package)
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mcp.types"))
        or (isinstance(node, ast.Import) and any(a.name.startswith("mcp.types") for a in node.names))
    }
    assert sorted(spelled) == []


@pytest.mark.parametrize("package", ["connections", "gateway", "oauth"])
def test_no_package_imports_another_packages_private_modules(package: str) -> None:
    # A package uses another through its `__init__` (and `connections.serving`); the one private
    # module they share is `oauth._shared`, the bottom home of `printable`, `write_private`, `Secret`.
    reached = {
        f"{path.relative_to(ROOT)}: {target}"
        for path in modules_of(package)
        for target in imported_modules(path, {module_name(p) for o in OURS for p in modules_of(o)})
        if target.split(".")[0] != package and target != "oauth._shared" and "._" in f".{target}".replace(".__", ".")
    }
    assert sorted(reached) == []
