"""`agent-sdk validate --online` lists the advertised upstreams (the reference "everything" server) and
reports an upstream tool that collides with an authored one, which offline validation cannot see
(and after which every listing fails closed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import free_port
from tests.gateway.conftest import ROOT, Upstream, url_connection
from tests.processes import running

BOTH_ERAS = ROOT / "tests" / "fixtures" / "upstreams" / "both_eras.py"

AGENT_SDK = Path(sys.executable).parent / "agent-sdk"

_ECHO_TOOL = """from connections import define_tool


async def execute(value: dict[str, object], ctx: object) -> dict[str, object]:
    return {"said": value.get("message")}


tool = define_tool(description="Our own echo.", input={"type": "object"}, effect="read", execute=execute)
"""


def _validate(project: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_SDK_") or k == "AGENT_SDK_PEERS"}
    return subprocess.run(
        [str(AGENT_SDK), "validate", "--dir", str(project), *flags],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_online_validation_reports_an_upstream_tool_colliding_with_an_authored_one(
    tmp_path: Path, everything: Upstream
) -> None:
    project = tmp_path / "project"
    (project / "agent" / "tools").mkdir(parents=True)
    (project / "agent" / "tools" / "echo.py").write_text(_ECHO_TOOL)
    connections = project / "agent" / "mcp-connections"
    connections.mkdir(parents=True)
    (connections / "everything.py").write_text(url_connection(everything.url))
    (connections / "gone.py").write_text(url_connection(f"http://127.0.0.1:{free_port()}/mcp"))

    offline = _validate(project)
    assert offline.returncode == 0, offline.stdout + offline.stderr  # the files alone are fine

    online = _validate(project, "--online")
    assert online.returncode == 1, online.stdout + online.stderr
    lines = online.stdout.splitlines()
    collision = [line for line in lines if "'echo'" in line]
    assert len(collision) == 1, lines
    assert collision[0].startswith("agent/mcp-connections/everything.py:3: error: connection 'everything'"), collision
    assert "collides with the authored tool" in collision[0], collision
    gone = [line for line in lines if "'gone'" in line]
    assert len(gone) == 1 and ": warning: " in gone[0] and "could not be listed" in gone[0], lines
    assert "1 error(s), 1 warning(s)" in online.stderr, online.stderr
    assert "Traceback" not in online.stdout + online.stderr


def test_online_validation_warns_of_advertised_resources_and_prompts_a_server_does_not_declare(
    tmp_path: Path, everything: Upstream
) -> None:
    """both_eras.py (an `mcp` 2.x server) declares tools only: advertising its resources and prompts offers
    nothing, so `--online` says to drop them; server-everything declares both, so it gets no warning."""
    advertised = "advertise_tools=True, advertise_resources=True, advertise_prompts=True"
    connections = tmp_path / "project" / "agent" / "mcp-connections"
    connections.mkdir(parents=True)
    (connections / "everything.py").write_text(
        "from connections import define_connection\n\n"
        f"connection = define_connection(url={everything.url!r}, {advertised})\n"
    )
    port = free_port()
    with running([sys.executable, str(BOTH_ERAS), "--port", str(port)], port=port):
        (connections / "eras.py").write_text(  # `echo` is everything's too: deny it here
            "from connections import define_connection\n\n"
            f"connection = define_connection(url='http://127.0.0.1:{port}/mcp', deny_tools=['echo'], {advertised})\n"
        )
        online = _validate(tmp_path / "project", "--online")
    assert online.returncode == 0, online.stdout + online.stderr  # a warning, not an error
    warned = [line for line in online.stdout.splitlines() if "advertise_" in line]
    assert warned == [
        "agent/mcp-connections/eras.py:3: warning: connection 'eras': advertise_resources and advertise_prompts "
        "are set, but its server declares no resources or prompts capability, so it offers none; drop "
        "advertise_resources and advertise_prompts from its definition"
    ], online.stdout + online.stderr
    assert "0 error(s), 1 warning(s)" in online.stderr, online.stderr
    assert "Traceback" not in online.stdout + online.stderr


def test_online_validation_reports_a_curated_servers_entry_that_picks_no_tool(
    tmp_path: Path, everything: Upstream
) -> None:
    project = tmp_path / "project"
    (project / "agent" / "mcp-connections").mkdir(parents=True)
    (project / "agent" / "mcp-connections" / "everything.py").write_text(url_connection(everything.url))
    (project / "agent" / "servers").mkdir()
    (project / "agent" / "servers" / "demo.py").write_text(
        "from connections import define_server\n"
        "server = define_server(\n"
        "    tools=[\n"
        "        {'connection': 'everything', 'name': 'echo'},\n"
        "        {'connection': 'everything', 'name': 'no-such-tool'},\n"
        "        {'connection': 'everything', 'name': 'get-*'},\n"
        "    ],\n"
        ")\n"
    )
    assert _validate(project).returncode == 0  # offline, the names cannot be checked
    online = _validate(project, "--online")
    assert online.returncode == 1, online.stdout + online.stderr
    found = [line for line in online.stdout.splitlines() if "servers/demo.py" in line]
    assert len(found) == 1, online.stdout
    assert found[0].startswith("agent/servers/demo.py:5: error: tools[1] picks no tool"), found
    assert "Traceback" not in online.stdout + online.stderr
