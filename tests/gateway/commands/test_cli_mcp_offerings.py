"""`agent-sdk mcp resources|read|prompts|prompt` against server-everything, and their one-sentence errors."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main
from tests.fixtures.upstreams.proctable import matching
from tests.gateway.commands.test_cli_mcp import write_connection
from tests.peers import node_bin

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    everything = node_bin("mcp-server-everything")
    write_connection(tmp_path, "mcp-connections", "everything", f"command={str(everything)!r}, args=['stdio']")
    write_connection(tmp_path, "mcp-connections", "ghost", "command='/nonexistent/mcp-server'")
    return tmp_path


def run(project: Path, *argv: str) -> int:
    return main(["mcp", *argv, "--dir", str(project)])


@pytest.mark.peers
def test_mcp_resources_and_read_against_server_everything(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(project, "resources", "everything", "--json") == 0
    listed = json.loads(capsys.readouterr().out)
    uris = [r["uri"] for r in listed["resources"]]
    assert "demo://resource/static/document/architecture.md" in uris
    assert "demo://resource/dynamic/blob/{resourceId}" in [t["uriTemplate"] for t in listed["resourceTemplates"]]
    assert run(project, "resources", "everything") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith(uris[0]) and any(line.endswith("(template) text/plain") for line in table)

    assert run(project, "read", "everything", "demo://resource/dynamic/text/3") == 0
    assert capsys.readouterr().out.startswith("Resource 3: This is a plaintext resource")
    assert run(project, "read", "everything", "demo://resource/dynamic/blob/3", "--json") == 0
    blob = base64.b64decode(json.loads(capsys.readouterr().out)["contents"][0]["blob"])
    assert blob.startswith(b"Resource 3:")
    assert run(project, "read", "everything", "demo://resource/dynamic/blob/3") == 0
    # The blob holds the time of day, so its length changes with the hour's digits: the summary says its size.
    assert capsys.readouterr().out.strip() == f"[blob: {len(blob)} bytes, text/plain]"
    # The CLI's stdio child; a session fixture's `streamableHttp` upstream may run meanwhile.
    assert not matching(f"{node_bin('mcp-server-everything')} stdio")


@pytest.mark.peers
def test_mcp_prompts_and_prompt_against_server_everything(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(project, "prompts", "everything") == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("args-prompt") and "city*, state" in line for line in lines)
    assert run(project, "prompts", "everything", "--json") == 0
    assert "simple-prompt" in [p["name"] for p in json.loads(capsys.readouterr().out)]

    assert run(project, "prompt", "everything", "args-prompt", "--arg", "city=Lyon") == 0
    assert capsys.readouterr().out.splitlines() == ["user:", "What's weather in Lyon?"]
    argv = ["prompt", "everything", "resource-prompt", "--arg", "resourceType=Text", "--arg", "resourceId=2"]
    assert run(project, *argv) == 0
    out = capsys.readouterr().out
    assert "user: [resource demo://resource/dynamic/text/2]" in out and "Resource 2:" in out
    assert run(project, *argv, "--json") == 0
    messages = json.loads(capsys.readouterr().out)["messages"]
    assert messages[1]["content"]["resource"]["uri"] == "demo://resource/dynamic/text/2"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["read", "everything", "nope://missing"], "connection 'everything': resources/read failed: upstream error"),
        (["prompts", "ghost"], "connection 'ghost': cannot start '/nonexistent/mcp-server'"),
        (["prompt", "everything", "args-prompt", "--arg", "city"], "--arg takes KEY=VALUE, e.g. --arg city=Paris"),
        (["resources", "nowhere"], "connection 'nowhere': no such connection"),
    ],
)
def test_mcp_offering_failures_are_one_sentence_without_a_traceback(project: Path, argv: list[str], says: str) -> None:
    cli = [sys.executable, "-c", "import sys; from gateway.cli import main; sys.exit(main())"]
    proc = subprocess.run(
        [*cli, "mcp", *argv, "--dir", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"agent-sdk: error: {says}" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
