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
