"""`agent-sdk init` (a project that validates and serves at once), `agent-sdk tools list|call`, and the
progress line on a terminal's stderr (issue #19 item 12)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import httpx2

from gateway.scaffold import FILES, read
from tests.gateway.conftest import serve

ROOT = Path(__file__).resolve().parents[3]
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def cli(*args: str, stderr: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")} | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr is None else stderr,
        text=True,
        timeout=90,
        check=False,
    )


def test_examples_quickstart_is_exactly_what_init_writes() -> None:
    for relative in FILES:
        assert (ROOT / "examples" / "quickstart" / relative).read_text() == read(relative), relative
    assert sorted(str(p.relative_to(ROOT / "examples" / "quickstart")) for p in _files()) == sorted(FILES)


def _files() -> list[Path]:
    folder = ROOT / "examples" / "quickstart"
    return [p for p in (*folder.rglob("*.py"), folder / "mcp.lock") if "__pycache__" not in p.parts]


def test_init_writes_a_project_that_validates_and_calls_its_tools(tmp_path: Path) -> None:
    project = tmp_path / "my-agent"
    made = cli("init", str(project))
    assert made.returncode == 0, made.stderr
    assert f"agent-sdk validate --dir {project}" in made.stdout
    checked = cli("validate", "--dir", str(project))
    assert (checked.returncode, checked.stdout) == (0, "")
    assert "1 connection(s), 1 tool(s); 0 error(s), 0 warning(s)" in checked.stderr

    listed = cli("tools", "list", "--dir", str(project), "--json")
    assert listed.returncode == 0, listed.stderr
    assert {(t["name"], t["connection"]) for t in json.loads(listed.stdout)} == {
        ("greet", None), ("add_note", "notes"), ("list_notes", "notes"), ("word_count", "notes")
    }  # fmt: skip
    greeted = cli("tools", "call", "greet", "--input", '{"name": "Ada"}', "--dir", str(project))
    assert greeted.returncode == 0, greeted.stderr
    assert json.loads(greeted.stdout)["structuredContent"] == {"greeting": "Hello, Ada!"}
    counted = cli("tools", "call", "word_count", "--input", '{"text": "one two three"}', "--dir", str(project))
    assert counted.returncode == 0 and json.loads(counted.stdout)["structuredContent"] == {"result": 3}


def test_an_init_project_serves_at_once(tmp_path: Path) -> None:
    project = tmp_path / "served"
    assert cli("init", str(project)).returncode == 0
    served = serve(project, tmp_path / "state")
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {**MCP_HEADERS, "mcp-protocol-version": "2025-06-18"}
        listed = httpx2.post(f"{served.url}/v1/mcp/tools", json=body, headers=headers, timeout=60)
    finally:
        served.stop()
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"greet", "add_note", "list_notes", "word_count"}


def test_init_never_overwrites_a_project(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text("{}")
    refused = cli("init", str(tmp_path))
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"agent-sdk: error: {tmp_path} already holds mcp.json; init writes a new project only (pick an empty folder)"
    )
    assert not (tmp_path / "agent").exists()


def test_tools_call_refuses_bad_input_and_unknown_names_with_a_sentence(tmp_path: Path) -> None:
    assert cli("init", str(tmp_path)).returncode == 0
    bad = cli("tools", "call", "greet", "--input", "{}", "--dir", str(tmp_path))
    assert (bad.returncode, bad.stderr.strip()) == (
        1, "agent-sdk: error: invalid input for tool 'greet': name: Field required"
    )  # fmt: skip
    unknown = cli("tools", "call", "gret", "--dir", str(tmp_path))
    assert unknown.stderr.strip() == (
        "agent-sdk: error: no server tool 'gret'; there are: add_note, greet, list_notes, word_count"
    )
    not_json = cli("tools", "call", "greet", "--input", "{name}", "--dir", str(tmp_path))
    assert "--input is not valid JSON" in not_json.stderr


SLOW = """\
import time
from connections import define_tool

def execute(value, ctx):
    time.sleep(1.8)
    return {"ok": True}

tool = define_tool(description="Takes a while.", input={"type": "object"}, execute=execute)
"""


def test_a_wait_over_a_second_shows_a_progress_line_on_a_terminal_only(tmp_path: Path) -> None:
    (tmp_path / "agent" / "tools").mkdir(parents=True)
    (tmp_path / "agent" / "tools" / "slow.py").write_text(SLOW)
    piped = cli("tools", "call", "slow", "--dir", str(tmp_path))
    assert piped.returncode == 0 and piped.stderr == ""

    leader, follower = pty.openpty()
    try:
        done = cli("tools", "call", "slow", "--dir", str(tmp_path), stderr=follower)
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0 and json.loads(done.stdout)["structuredContent"] == {"ok": True}
    text = seen.decode()
    assert "calling 'slow' (1." in text  # drawn after the first second, with the elapsed time
    assert text.endswith("\r\x1b[2K")  # and erased at the end
