"""Feedback while a person waits: `agent-sdk mcp call` shows the server's own progress notifications
(the reference "everything" server's long-running operation), and a first start of several stdio
servers logs how many of how many are ready."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gateway.conftest import ROOT, assert_clean, make_project, serve
from tests.peers import node_bin

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
COUNTING = ROOT / "tests" / "fixtures" / "upstreams" / "counting_server.py"


def test_mcp_call_shows_the_servers_progress_notifications(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    server = {"command": str(node_bin("mcp-server-everything")), "args": ["stdio"]}
    (project / "mcp.json").write_text(json.dumps({"mcpServers": {"everything": server}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_")}
    done = subprocess.run(
        [str(AGENT_SDK), "mcp", "call", "everything", "trigger-long-running-operation", "--dir", str(project),
         "--args", '{"duration": 1, "steps": 3}'],
        env={**env, "AGENT_SDK_STATE_ROOT": str(tmp_path / "state")},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Long running operation completed" in json.loads(done.stdout)["content"][0]["text"]
    progress = [line for line in done.stderr.splitlines() if "| progress " in line]
    assert progress == ["everything| progress 1/3", "everything| progress 2/3", "everything| progress 3/3"], done.stderr


def _stdio(name: str) -> str:
    return (
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={sys.executable!r}, args=[{str(COUNTING)!r}, 'stdio'], "
        f"advertise_tools=True, allow_tools=[{name!r}])\n"
    )


def test_a_first_start_of_several_stdio_servers_says_how_many_are_ready(tmp_path: Path) -> None:
    tools = ("echo", "pid", "env")  # one each: advertised names must not collide
    project = make_project(tmp_path / "project", {f"s{i}": _stdio(tool) for i, tool in enumerate(tools)}, tools=False)
    served = serve(project, tmp_path / "state")
    try:
        with served.client() as http:
            listed = http.get("/v1/tools")
    finally:
        served.stop()
    assert listed.status_code == 200 and sorted(t["name"] for t in listed.json()["tools"]) == sorted(tools)
    log = served.log_text()
    assert_clean(log)
    counts = [
        line.split("stdio servers: ")[1].split(" ready")[0] for line in log.splitlines() if "stdio servers: " in line
    ]
    assert counts == ["1 of 3", "2 of 3", "3 of 3"], log
