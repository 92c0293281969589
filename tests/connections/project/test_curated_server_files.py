"""`agent/servers/<name>.py`: a curated server's file loads, and each of its errors is a diagnostic with its line."""

from __future__ import annotations

from pathlib import Path

from connections import load_project

_CONNECTION = 'from connections import define_connection\nconnection = define_connection(command="true")\n'


def _project(tmp_path: Path, server: str) -> Path:
    (tmp_path / "agent" / "mcp-connections").mkdir(parents=True)
    (tmp_path / "agent" / "servers").mkdir()
    (tmp_path / "agent" / "mcp-connections" / "everything.py").write_text(_CONNECTION)
    (tmp_path / "agent" / "servers" / "demo.py").write_text(server)
    return tmp_path


def test_a_good_file_is_a_curated_server(tmp_path: Path) -> None:
    project = load_project(
        _project(
            tmp_path,
            "from connections import define_server\n"
            "server = define_server(\n"
            "    instructions='Say things.',\n"
            "    tools=[\n"
            "        {'connection': 'everything', 'name': 'echo', 'rename': 'say', 'description': 'Says it'},\n"
            "        {'connection': 'everything', 'annotation': 'readOnlyHint'},\n"
            "        {'name': 'get-*'},\n"
            "        {'connection': 'everything', 'name': 'get-env', 'set': {'a': 1}, 'hide': ['a']},\n"
            "    ],\n"
            "    prompts=[{'connection': 'everything'}],\n"
            ")\n",
        )
    )
    assert project.ok, [d.format() for d in project.diagnostics]
    server = project.servers["demo"]
    assert server.instructions == "Say things."
    assert [s.rename for s in server.tools] == ["say", None, None, None]
    assert server.tools[3].hidden == ("a",) and server.tools[3].fixed == {"a": 1}


def test_every_error_is_reported_at_its_entry(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        "from connections import define_server\n"  # 1
        "server = define_server(\n"  # 2
        "    tools=[\n"  # 3
        "        {'connection': 'everything', 'name': 'echo', 'rename': 'say'},\n"  # 4
        "        {'connection': 'everything', 'name': 'add', 'rename': 'say'},\n"  # 5
        "        {'connection': 'everything', 'name': 'get-env', 'hide': ['a']},\n"  # 6
        "        {'connection': 'everything', 'colour': 'red'},\n"  # 7
        "        {'connection': 'nowhere'},\n"  # 8
        "        {'name': 'get-*', 'rename': 'one'},\n"  # 9
        "    ],\n"
        "    colour=1,\n"
        ")\n",
    )
    project = load_project(root)
    found = {(d.line, d.code) for d in project.diagnostics if d.path.name == "demo.py"}
    assert found == {
        (5, "rename-collision"),
        (6, "hidden-without-value"),
        (7, "unknown-field"),
        (8, "unknown-connection"),
        (9, "bad-selector"),
        (2, "unknown-field"),
    }
    text = "\n".join(d.format(root) for d in project.diagnostics)
    assert "agent/servers/demo.py:6: error: tools[2]: argument 'a' is hidden without a value" in text
    assert "demo" not in project.servers and not project.ok


def test_a_file_without_a_server_says_how_to_write_one(tmp_path: Path) -> None:
    project = load_project(_project(tmp_path, "x = 1\n"))
    (only,) = [d for d in project.diagnostics if d.path.name == "demo.py"]
    assert only.code == "no-definition" and "define_server(...)" in only.message


def test_discovery_settings_load_and_bad_ones_are_reported(tmp_path: Path) -> None:
    good = load_project(
        _project(
            tmp_path / "good",
            "from connections import define_server\n"
            "server = define_server(discovery=True, always_visible=['say', 'get-*'], tools=[{'name': 'echo'}])\n",
        )
    )
    assert good.ok, [d.format() for d in good.diagnostics]
    assert good.servers["demo"].discovery is True and good.servers["demo"].always_visible == ("say", "get-*")
    bad = load_project(
        _project(
            tmp_path / "bad",
            "from connections import define_server\n"
            "server = define_server(discovery='yes', always_visible='say', tools=[{'name': 'echo'}])\n",
        )
    )
    messages = [d.format() for d in bad.diagnostics]
    assert not bad.ok
    assert any("discovery must be True or False, not str" in m and "demo.py" in m for m in messages), messages
    assert any("always_visible must be a list of tool names or globs" in m for m in messages), messages
