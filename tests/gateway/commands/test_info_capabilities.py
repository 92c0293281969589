"""`agent-sdk info` asks the servers of connections that advertise resources or prompts whether they declare
them (issue 34 item 12): the reference server-filesystem (npm) declares neither, so `advertise_resources`
offers nothing and `info` says to drop it, while server-everything, which declares both, gets no warning.
`--offline` asks nobody."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.gateway.conftest import ROOT
from tests.gateway.mcp.test_offerings_peers import everything_stdio
from tests.peers import node_bin

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"
SAID = (
    "connection 'filesystem': advertise_resources and advertise_prompts are set, but its server declares no "
    "resources or prompts capability, so it offers none; drop advertise_resources and advertise_prompts from "
    "its definition"
)


def _info(project: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return subprocess.run(
        [str(AGENT_SDK), "info", "--dir", str(project), *flags],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _project(tmp_path: Path) -> Path:
    connections = tmp_path / "project" / "agent" / "mcp-connections"
    connections.mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    (connections / "filesystem.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(command={str(node_bin('mcp-server-filesystem'))!r}, args=[{str(shared)!r}],"
        " advertise_resources=True, advertise_prompts=True)\n"
    )
    (connections / "everything.py").write_text(everything_stdio(advertise_resources=True, advertise_prompts=True))
    return tmp_path / "project"


def test_info_warns_of_a_connection_whose_server_declares_no_resources_or_prompts(tmp_path: Path) -> None:
    project = _project(tmp_path)
    table = _info(project)
    assert table.returncode == 0, table.stdout + table.stderr
    warned = [line for line in table.stderr.splitlines() if line.startswith("warning: ")]
    assert warned == [f"warning: {SAID}"], table.stderr
    assert "Traceback" not in table.stdout + table.stderr

    doc = _info(project, "--json")
    assert doc.returncode == 0, doc.stderr
    entries = {c["name"]: c for c in json.loads(doc.stdout)["connections"]}
    assert entries["filesystem"]["warnings"] == [{"code": "undeclared-capability", "message": SAID}]
    assert "warnings" not in entries["everything"]

    offline = _info(project, "--offline")
    assert offline.returncode == 0 and "warning: " not in offline.stderr, offline.stderr
