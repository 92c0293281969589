"""A stdio server's stderr in `serve`'s log: with `--log-format json` each line is one JSON object
naming the connection (never a raw line in a JSON log); as text, each line is prefixed with the
connection. The child is the reference "everything" server, which writes to its stderr on start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.conftest import free_port
from tests.gateway.conftest import ROOT
from tests.peers import node_bin
from tests.processes import wait_for_port


def _served_stderr(tmp_path: Path, log_format: str) -> str:
    project = tmp_path / "project"
    project.mkdir()
    (project / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {
                        "command": str(node_bin("mcp-server-everything")),
                        "args": ["stdio"],
                        "agent-sdk": {"advertiseTools": True},
                    }
                }
            }
        )
    )
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    err = tmp_path / "stderr.log"
    with err.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--dir", str(project), "--port", str(port),
             "--state-root", str(tmp_path / "state"), "--log-format", log_format],
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )  # fmt: skip
    try:
        wait_for_port(port, proc, "agent-sdk serve")
        answer = httpx2.post(f"http://127.0.0.1:{port}/v1/tools/echo", json={"input": {"message": "hi"}}, timeout=60)
        assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text
    finally:
        proc.send_signal(signal.SIGTERM)  # uvicorn stops cleanly; SIGINT adds the CLI's own "interrupted"
        proc.wait(timeout=30)
    return err.read_text()


def test_a_stdio_childs_stderr_lines_are_json_objects_naming_the_connection(tmp_path: Path) -> None:
    text = _served_stderr(tmp_path, "json")
    lines = [line for line in text.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # today: "Starting default (STDIO) server..." raw
    child = [r for r in records if r.get("event") == "upstream_stderr"]
    assert any("Starting default (STDIO) server" in r["message"] for r in child), lines
    assert {r["connection"] for r in child} == {"everything"}, child
    assert {r["logger"] for r in child} == {"connections.stderr"}, child


def test_as_text_each_stderr_line_is_prefixed_with_its_connection(tmp_path: Path) -> None:
    lines = _served_stderr(tmp_path, "text").splitlines()
    assert "INFO everything| Starting default (STDIO) server..." in lines, lines
    assert "Starting default (STDIO) server..." not in lines, lines
