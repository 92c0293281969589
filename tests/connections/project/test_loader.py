"""The project loader: path-derived names, folders, extensions, lib/ imports and per-file isolation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from connections import ProjectError, load_project


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


CONNECTION = """
from connections import define_connection

connection = define_connection(url="https://{0}.example.com/mcp")
"""
TOOL = """
from connections import define_tool

tool = define_tool(description="{0}", execute=lambda value, ctx: None)
"""


def test_names_come_from_the_file_path(tmp_path: Path) -> None:
    write(tmp_path, "agent/mcp-connections/linear.py", CONNECTION.format("linear"))
    write(tmp_path, "agent/tools/approve_pr.py", TOOL.format("Approve a PR."))
    project = load_project(tmp_path)
    assert project.diagnostics == []
    assert sorted(project.connections) == ["linear"] and sorted(project.tools) == ["approve_pr"]
    assert project.connections["linear"].source == tmp_path / "agent/mcp-connections/linear.py"
    assert project.connections["linear"].line == 3


def test_a_host_connections_file_is_host_only(tmp_path: Path) -> None:
    write(tmp_path, "agent/host-connections/deploys.py", CONNECTION.format("deploys"))
    defn = load_project(tmp_path).connections["deploys"]
    assert defn.host_only and not defn.attached


def test_extension_contributions_are_namespaced(tmp_path: Path) -> None:
    write(tmp_path, "agent/extensions/ci/tools/failed_jobs.py", TOOL.format("Failed jobs."))
    write(tmp_path, "agent/extensions/ci/mcp-connections/buildkite.py", CONNECTION.format("buildkite"))
    write(tmp_path, "agent/extensions/ci/host-connections/admin.py", CONNECTION.format("admin"))
    project = load_project(tmp_path)
    assert project.diagnostics == []
    assert sorted(project.tools) == ["ci__failed_jobs"]
    assert sorted(project.connections) == ["ci__admin", "ci__buildkite"]
    assert project.connections["ci__admin"].host_only
    ext = project.extensions["ci"]
    assert (sorted(ext.tools), sorted(ext.connections)) == (["ci__failed_jobs"], ["ci__admin", "ci__buildkite"])


def test_an_extension_file_may_not_use_the_reserved_separator_either(tmp_path: Path) -> None:
    write(tmp_path, "agent/extensions/ci/tools/a__b.py", TOOL.format("x"))
    [diag] = load_project(tmp_path).diagnostics
    assert diag.code == "bad-name" and "contains '__'" in diag.message


def test_a_tool_and_a_connection_may_share_a_name(tmp_path: Path) -> None:
    write(tmp_path, "agent/mcp-connections/notes.py", CONNECTION.format("notes"))
    write(tmp_path, "agent/tools/notes.py", TOOL.format("Notes."))
    project = load_project(tmp_path)
    assert project.ok and "notes" in project.connections and "notes" in project.tools


def test_definition_files_import_shared_code_from_agent_lib(tmp_path: Path) -> None:
    write(tmp_path, "agent/lib/urls.py", 'BASE = "https://lib.example.com"\n')
    write(
        tmp_path,
        "agent/mcp-connections/from_lib.py",
        """
        from connections import define_connection
        from lib.urls import BASE

        connection = define_connection(url=BASE + "/mcp")
        """,
    )
    project = load_project(tmp_path)
    assert project.diagnostics == []
    assert project.connections["from_lib"].url == "https://lib.example.com/mcp"


def test_a_raise_inside_agent_lib_points_at_the_importing_line(tmp_path: Path) -> None:
    write(tmp_path, "agent/lib/boom.py", 'raise KeyError("MISSING_SETTING")\n')
    write(tmp_path, "agent/mcp-connections/uses_boom.py", "import os\n\nimport lib.boom\n")
    [diag] = load_project(tmp_path).diagnostics
    assert (diag.line, diag.code) == (3, "import-error")
    assert diag.message.startswith("importing this file raised KeyError: 'MISSING_SETTING'")


def test_sys_exit_in_a_definition_file_is_a_diagnostic(tmp_path: Path) -> None:
    write(tmp_path, "agent/tools/quits.py", "import sys\n\nsys.exit(3)\n")
    [diag] = load_project(tmp_path).diagnostics
    assert (diag.line, diag.code) == (3, "import-error") and "SystemExit" in diag.message


def test_one_broken_file_does_not_stop_the_others_loading(tmp_path: Path) -> None:
    write(tmp_path, "agent/mcp-connections/a_bad.py", "raise RuntimeError('nope')\n")
    write(tmp_path, "agent/mcp-connections/b_good.py", CONNECTION.format("good"))
    project = load_project(tmp_path)
    assert sorted(project.connections) == ["b_good"]
    assert [d.path.name for d in project.diagnostics] == ["a_bad.py"]


def test_a_connection_made_by_a_lib_helper_has_no_line_in_the_file(tmp_path: Path) -> None:
    write(
        tmp_path,
        "agent/lib/make.py",
        """
        from connections import define_connection

        def remote(host):
            return define_connection(url=f"https://{host}/mcp", bogus=1)
        """,
    )
    write(tmp_path, "agent/mcp-connections/helper_made.py", "from lib.make import remote\n\nconnection = remote('h')\n")
    [diag] = load_project(tmp_path).diagnostics
    assert diag.path.name == "helper_made.py" and diag.line is None and diag.code == "unknown-field"


def test_loading_the_same_project_twice_gives_the_same_result(tmp_path: Path) -> None:
    write(tmp_path, "agent/mcp-connections/linear.py", CONNECTION.format("linear"))
    write(tmp_path, "agent/lib/__init__.py", "")
    first, second = load_project(tmp_path), load_project(tmp_path)
    assert first.connections == second.connections and first.diagnostics == second.diagnostics == []


def test_a_missing_project_folder_raises_project_error(tmp_path: Path) -> None:
    with pytest.raises(ProjectError, match="does not exist; pass --dir with your agent project"):
        load_project(tmp_path / "absent")


def test_a_stray_file_in_an_extension_folder_is_a_warning(tmp_path: Path) -> None:
    write(tmp_path, "agent/extensions/notes.py", "x = 1\n")
    [diag] = load_project(tmp_path).diagnostics
    assert (diag.severity, diag.code) == ("warning", "stray-file")


def test_a_stdio_child_runs_in_the_project_folder_or_its_cwd_relative_to_it(tmp_path: Path) -> None:
    stdio = 'from connections import define_connection\n\nconnection = define_connection(command="srv"{0})\n'
    write(tmp_path, "agent/mcp-connections/plain.py", stdio.format(""))
    write(tmp_path, "agent/mcp-connections/sub.py", stdio.format(', cwd="data"'))
    write(tmp_path, "agent/mcp-connections/abs.py", stdio.format(f", cwd={str(tmp_path / 'data')!r}"))
    write(tmp_path, "agent/mcp-connections/gone.py", stdio.format(', cwd="missing"'))
    write(tmp_path, "agent/mcp-connections/remote.py", CONNECTION.format("remote"))
    (tmp_path / "data").mkdir()
    project = load_project(tmp_path)
    root = tmp_path.resolve()
    assert project.connections["plain"].cwd == str(root)
    assert project.connections["sub"].cwd == project.connections["abs"].cwd == str(root / "data")
    assert project.connections["remote"].cwd is None
    assert "gone" not in project.connections
    (gone,) = project.diagnostics
    assert gone.code == "bad-cwd" and gone.line == 3
    assert gone.message == (
        f"cwd 'missing' is not a folder (resolved against the project folder: {str(root / 'missing')!r}); "
        "create it or fix cwd"
    )
