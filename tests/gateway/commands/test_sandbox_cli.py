"""`agent-sdk info` and `agent-sdk validate --online` say which stdio connections are sandboxed and how; the
project's default (`agent/sandbox.toml`) sandboxes every stdio connection that does not say `sandbox=False`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gateway.conftest import ROOT, make_project
from tests.gateway.test_sandbox import hostile
from tests.peers import debian_bin, py_peer

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"


def cli(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    env |= {"PYTHONPATH": str(ROOT)} | ({"PATH": path} if path is not None else {})
    return subprocess.run([str(AGENT_SDK), *args], env=env, capture_output=True, text=True, timeout=90, check=False)


def project(root: Path) -> Path:
    """`time` takes the project's default (sandboxed), `data` grants a folder, `open` opts out."""
    time = str(py_peer("mcp-server-time"))
    bodies = {
        "time": f"connection = define_connection(command={time!r})",
        "data": f"connection = define_connection(command={time!r}, sandbox={{'writable': ['data'], 'network': True}})",
        "open": f"connection = define_connection(command={time!r}, sandbox=False)",
    }
    folder = root / "agent" / "mcp-connections"
    folder.mkdir(parents=True)
    for name, body in bodies.items():
        (folder / f"{name}.py").write_text(f"from connections import define_connection\n\n{body}\n")
    (root / "data").mkdir()
    (root / "agent" / "sandbox.toml").write_text("stdio = true\n")
    return root


def test_info_says_which_connections_are_sandboxed_and_how(tmp_path: Path) -> None:
    root = project(tmp_path / "project")
    shown = cli("info", "--dir", str(root), "--json", "--offline")
    assert shown.returncode == 0, shown.stderr
    sandboxes = {c["name"]: c["sandbox"] for c in json.loads(shown.stdout)["connections"]}
    assert sandboxes["open"] is None
    assert sandboxes["time"]["by"] == "bubblewrap" and sandboxes["time"]["network"] is False
    assert sandboxes["data"]["writable"] == [str((root / "data").resolve())] and sandboxes["data"]["network"] is True
    table = cli("info", "--dir", str(root), "--offline").stdout
    assert "sandbox: bubblewrap: network=on writable=" in table


def test_validate_online_names_the_sandboxes_and_fails_when_bubblewrap_is_missing(tmp_path: Path) -> None:
    debian_bin("bwrap")
    root = project(tmp_path / "project")
    ok = cli("validate", "--dir", str(root), "--online")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "sandboxed: data: bubblewrap: network=on" in ok.stderr and "sandboxed: time:" in ok.stderr
    assert "sandboxed: open" not in ok.stderr
    missing = cli("validate", "--dir", str(root), "--online", path=str(tmp_path / "no-programs-here"))
    assert missing.returncode == 1
    assert "connection 'time': the connection is sandboxed, but bubblewrap (bwrap) is not on the PATH" in missing.stdout
    assert "apt-get install bubblewrap" in missing.stdout and "connection 'open'" not in missing.stdout


def test_a_mistyped_project_default_is_an_error(tmp_path: Path) -> None:
    root = project(tmp_path / "project")
    (root / "agent" / "sandbox.toml").write_text("stdio = 'yes'\n")
    found = cli("validate", "--dir", str(root))
    assert found.returncode == 1
    assert "`stdio` in agent/sandbox.toml must be true or false, got 'yes'; write `stdio = true`" in found.stdout


def test_mcp_call_hides_its_state_root_from_a_sandboxed_child(tmp_path: Path) -> None:
    """`agent-sdk mcp call` opens the connection itself: its `--state-root` (token stores) is hidden as `serve`'s."""
    debian_bin("bwrap")
    root = make_project(tmp_path / "project", {"hostile": hostile("True")}, tools=False)
    state = root / "tokens"  # inside the child's cwd: visible but for the hiding
    state.mkdir()
    (state / "mcp-auth.json").write_text("{}")
    arguments = json.dumps({"path": str(state / "mcp-auth.json")})
    said = cli(
        "mcp", "call", "hostile", "read_file", "--args", arguments, "--dir", str(root), "--state-root", str(state)
    )
    assert said.returncode == 0, said.stderr
    found = json.loads(json.loads(said.stdout)["content"][0]["text"])
    assert found["ok"] is False and found["error"].startswith("ENOENT"), found
