"""The sandbox's profile in-process (connections/client/_sandbox.py): which runtime folders a child is shown, and
that nothing shows a whole home folder. The real bubblewrap runs in tests/gateway/test_sandbox.py."""

from __future__ import annotations

from pathlib import Path

from connections.client._sandbox import runtime_paths
from connections.project._sandbox import Sandbox


def program(path: Path, first_line: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{first_line}\n")
    path.chmod(0o755)
    return path


def test_a_runtime_under_the_home_folder_is_shown_by_its_installation(tmp_path: Path) -> None:
    home = tmp_path / "home"
    node = program(home / ".nvm" / "versions" / "node" / "v22" / "bin" / "node", "ELF")
    server = program(tmp_path / "srv" / "server" / "dist" / "index.js", "#!/usr/bin/env node")
    shown = runtime_paths(str(server), [str(home)], path=str(node.parent))
    assert shown == [str(server.parent), str(home / ".nvm" / "versions" / "node" / "v22")]


def test_a_venv_shows_its_base_interpreter(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = program(home / ".pyenv" / "versions" / "3.11.7" / "bin" / "python3", "ELF")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base.parent}\n")
    (venv / "bin" / "python").symlink_to(base)
    tool = program(venv / "bin" / "mcp-server-x", f"#!{venv / 'bin' / 'python'}")
    shown = runtime_paths(str(tool), [str(home)])
    assert str(venv) in shown and str(home / ".pyenv" / "versions" / "3.11.7") in shown
    assert str(home) not in shown


def test_a_program_straight_in_a_home_folder_shows_only_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tool = program(home / "bin" / "tool", "ELF")  # its installation would be the home folder itself
    assert runtime_paths(str(tool), [str(home)]) == [str(tool)]


def test_the_sandbox_describes_its_grants_in_one_line() -> None:
    sandbox = Sandbox(writable=("/srv/data",), network=True, max_processes=8)
    assert sandbox.describe() == ("bubblewrap: network=on writable=/srv/data processes<=8 files<=1024 memory<=8192MiB")
